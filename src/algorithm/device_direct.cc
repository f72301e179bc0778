#include "algorithm/device_direct.h"

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "algorithm/device_exec.h"
#include "algorithm/local_ops.h"
#include "backend/backend.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

constexpr int kScratchSlot = 3;  // of StagingState::scratch (StagedBackend uses 0-2)

// Local ops on the rank's device memory: the kernels plugin on the proxy's
// stream; fence() waits for the stream (bounded by the timeout and abort).
class DeviceLocalOps final : public LocalOps {
 public:
  DeviceLocalOps(Comm& c, const hetcclKernelsApi_t& k)
      : k_(k), dev_(c.device()), ds_(*c.stagingState()), timeoutS_(c.options().timeoutS), abort_(&c.abortFlag()) {}
  bool deviceMemory() const override { return true; }
  bool transportFolds() const override { return false; }
  uint8_t* scratch(size_t bytes) override { return ds_.scratch().get(kScratchSlot, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { dev_.copy(dst, src, bytes, ds_.stream()); }
  void reduce(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind k) override {
    check(k_.reduce(out, a, b, n, static_cast<int>(dt), static_cast<int>(k), ds_.stream()), "reduce");
  }
  void scale(void* out, const void* in, size_t n, DataType dt, double scalar) override {
    check(k_.scale(out, in, n, static_cast<int>(dt), scalar, ds_.stream()), "scale");
  }
  void divide(void* buf, size_t n, DataType dt, int divisor) override {
    check(k_.divide(buf, n, static_cast<int>(dt), divisor, ds_.stream()), "divide");
  }
  void fence(const char* what) override { ds_.sync(timeoutS_, abort_, what); }

 private:
  void check(int rc, const char* what) {
    if (rc != HETCCL_KERNELS_SUCCESS)
      throwError(static_cast<hetcclResult_t>(rc),
                 std::string("device kernel '") + what + "' (" + k_.kind + "): " + k_.lastError());
  }
  const hetcclKernelsApi_t& k_;
  DeviceRuntime& dev_;
  StagingState& ds_;
  double timeoutS_;
  const std::atomic<bool>* abort_;
};

// The group's library on device buffers, on the proxy's stream. Each call
// (or group of point-to-point calls) waits until done, bounded: the border
// transfers that follow read its output from the host thread.
class DirectBackend final : public Backend {
 public:
  DirectBackend(Backend& inner, const BackendContext& ctx, StagingState& ds) : Backend(ctx), inner_(inner), ds_(ds) {}
  const char* name() const override { return inner_.name(); }
  void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream) override {
    inner_.allReduce(send, recv, count, dt, op, ds_.stream());
    done("waiting for a group AllReduce of the vendor library");
  }
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op, Stream) override {
    inner_.reduceScatter(send, recv, recvcount, dt, op, ds_.stream());
    done("waiting for a group ReduceScatter of the vendor library");
  }
  void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream) override {
    inner_.allGather(send, recv, sendcount, dt, ds_.stream());
    done("waiting for a group AllGather of the vendor library");
  }
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream) override {
    inner_.broadcast(send, recv, count, dt, root, ds_.stream());
    done("waiting for a group Broadcast of the vendor library");
  }
  void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root, Stream) override {
    inner_.reduce(send, recv, count, dt, op, root, ds_.stream());
    done("waiting for a group Reduce of the vendor library");
  }
  void reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                           const ReduceOp& op, Stream) override {
    inner_.reduceScatterShards(send, recv, bounds, dt, op, ds_.stream());
    done("waiting for a group ReduceScatter of the vendor library");
  }
  void allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream) override {
    inner_.allGatherShards(buf, bounds, dt, ds_.stream());
    done("waiting for a group AllGather of the vendor library");
  }
  void send(const void* buf, size_t count, DataType dt, int peer, Stream) override {
    inner_.send(buf, count, dt, peer, ds_.stream());
    if (depth_ == 0) done("waiting for a group send of the vendor library");
  }
  void recv(void* buf, size_t count, DataType dt, int peer, Stream) override {
    inner_.recv(buf, count, dt, peer, ds_.stream());
    if (depth_ == 0) done("waiting for a group receive of the vendor library");
  }
  void groupStart() override {
    ++depth_;
    inner_.groupStart();
  }
  void groupEnd() override {
    if (depth_ == 0) throwError(hetcclInternalError, "direct backend: groupEnd without groupStart");
    inner_.groupEnd();
    if (--depth_ == 0) done("waiting for group send/recv of the vendor library");
  }

 private:
  void done(const char* what) { ds_.sync(ctx_.timeoutS, ctx_.abort, what); }
  Backend& inner_;
  StagingState& ds_;
  int depth_ = 0;
};

// The proxy's part: once the caller's stream reached the call, run the plan
// on the user's buffers with the device forms of the backend and local ops.
void runDirect(Comm& c, CollArgs a, Event ready) {
  DeviceRuntime& d = c.device();
  StagingState& ds = *c.stagingState();
  const double to = c.options().timeoutS;
  d.makeCurrent();
  const std::string name = collKindName(a.kind);
  waitEvent(d, ready, to, &c.abortFlag(), ("waiting for the caller's stream to reach the " + name).c_str());
  DirectBackend be(c.groupBackend(), c.groupBackend().context(), ds);
  DeviceLocalOps lo(c, *c.kernels());
  a.stream = nullptr;
  try {
    runCollective(PlanContext{c, be, &lo, nullptr}, a);
    lo.fence(("finishing the " + name).c_str());
  } catch (...) {
    // Best effort: let enqueued kernels finish before the call returns and
    // the caller reuses its buffers (bounded; the abort flag ends it).
    try {
      ds.sync(to, &c.abortFlag(), ("cleaning up a failed " + name).c_str());
    } catch (...) {
    }
    throw;
  }
}

}  // namespace

bool takesDirectPath(const Comm& c, const CollArgs& a) {
  if (!c.gpuDirect() || a.count == 0) return false;
  const size_t bytes = a.count * dataTypeSize(a.dt);
  switch (a.kind) {
    case CollKind::kAllReduce:
      return bytes >= c.gpuDirectMin() && !(a.op.preMul && !dataTypeIsFloat(a.dt)) && !a.op.scalarAt &&
             inPlaceOrDisjoint(a, bytes, bytes);
    case CollKind::kBroadcast:  // only the root's send buffer is read
      return bytes >= c.gpuDirectMin() && (c.rank() != a.root || inPlaceOrDisjoint(a, bytes, bytes));
    case CollKind::kAllGather:  // in place: send is this rank's block of recv
      return bytes * c.nranks() >= c.gpuDirectMin() &&
             inPlaceOrDisjoint(a, bytes, bytes * c.nranks(), bytes * c.rank());
    default: return false;
  }
}

// [ready event] on the caller's stream; the proxy runs the call (after the
// jobs queued before it) once the stream reached it; this thread waits.
void runDirectCall(Comm& c, const CollArgs& a) {
  StagingState& ds = *c.stagingState();
  Event ready = ds.takeEvent();
  try {
    c.device().recordEvent(ready, a.stream);
  } catch (...) {
    ds.giveEvent(ready);
    throw;
  }
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
  };
  auto w = std::make_shared<Waiter>();
  LOG_TRACE(kColl, "GPU %s of %zu elements, direct", collKindName(a.kind), a.count);
  c.proxy().submit(
      [&c, a, ready, w] {
        try {
          runDirect(c, a, ready);
        } catch (...) {
          w->error = std::current_exception();
          throw;  // the proxy's error sticks, as for the staged path
        }
      },
      [&ds, ready, w] {
        ds.giveEvent(ready);
        std::lock_guard<std::mutex> g(w->mu);
        w->done = true;
        w->cv.notify_all();
      });
  // No limit of its own: every wait of the job is bounded by the timeout
  // and the abort flag, and the job works on the caller's buffers, so this
  // thread may not return before it ends.
  std::unique_lock<std::mutex> lk(w->mu);
  w->cv.wait(lk, [&] { return w->done; });
  if (w->error) std::rethrow_exception(w->error);
  const hetcclResult_t st = c.proxy().status();  // a dropped job: an earlier one failed
  if (st != hetcclSuccess && st != hetcclInProgress)
    throwError(st, std::string("direct ") + collKindName(a.kind) + " not run: an earlier call failed (" +
                       c.proxy().errorText() + ")");
}

}  // namespace hetccl
