// libhetccl-emu-nccl.so: the group library of emulated GPUs (device kind
// "emu"), with NCCL's ABI, doing for a group of emu ranks what NCCL does
// for a group of GPUs: collectives on their device memory, in the order of
// their streams. Each communicator runs its calls on a host-memory hetccl
// communicator of its own (libhetccl.so, built-in host backend, hetccl's
// transports between the processes), so its results are real.
//
// Order. A call with a stream runs when that stream reaches it, and a
// communicator's calls run one after another in the order they were issued
// (as NCCL orders a communicator's work), on one executor thread per
// communicator: the stream's operation marks the call ready and waits for
// the executor to have run it. A call with a NULL stream (host ranks) runs
// before it returns.
//
// It also stands for NCCL where hetccl's handling of a vendor library is
// tested: like NCCL 2.28 it exports its API with default visibility and
// calls some of it through its own PLT (every collective first asks
// ncclCommGetAsyncError and ncclGetVersion, ncclBcast calls ncclBroadcast,
// ncclCommInitRank calls ncclCommInitRankConfig, ncclCommDestroy calls
// ncclCommGetAsyncError), and refuses a communicator handle it did not make
// (ncclInvalidUsage). hetcclEmuNcclSelfCalls() counts the PLT calls that
// reached it with one of its own handles. HETCCL_EMU_INIT_DELAY_MS: a
// non-blocking init stays in progress that long (a slow vendor init), until
// ncclCommAbort ends it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/settings.h"
#include "emu/emu_runtime.h"
#include "hetccl/hetccl.h"

namespace {

using ncclResult_t = int;
constexpr uint64_t kMagic = 0x554d45434c434e48ull;  // "HNCCLCEMU"
constexpr int kVersion = 22809;

// A communicator's calls, run one after another in issue order. Shared
// with the stream operations that wait for it, which may outlive the
// communicator (abort).
class Executor {
 public:
  Executor() : thread_([this] { loop(); }) {}
  ~Executor() { stop(false); }
  // drain: run every call issued first (destroy); else drop what has not
  // run and let every waiting stream go (abort).
  void stop(bool drain) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (drain) cv_.wait(l, [&] { return done_ >= issued_; });
      stop_ = true;
      done_ = issued_;
      ops_.clear();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Queues `op` as the next call; it runs once release(ticket) came.
  uint64_t issue(std::function<void()> op) {
    std::lock_guard<std::mutex> g(mu_);
    ops_.push_back(Op{++issued_, std::move(op), false});
    return issued_;
  }
  // From the call's stream: the call may run now; returns when it has (or
  // the communicator was aborted).
  void releaseAndWait(uint64_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    for (Op& o : ops_)
      if (o.ticket == ticket) o.ready = true;
    cv_.notify_all();
    cv_.wait(l, [&] { return done_ >= ticket; });
  }

 private:
  struct Op {
    uint64_t ticket;
    std::function<void()> run;
    bool ready;
  };
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || (!ops_.empty() && ops_.front().ready); });
      if (stop_) return;
      Op op = std::move(ops_.front());
      ops_.pop_front();
      l.unlock();
      op.run();
      l.lock();
      done_ = std::max(done_, op.ticket);
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> ops_;
  uint64_t issued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

struct UserOp {
  hetcclDataType_t dt;
  int residence;           // ncclScalarDevice (0): read `at` when the call runs
  const void* at;          // device residence
  unsigned char value[8];  // host immediate, read at creation
};

struct EmuComm {
  uint64_t magic = kMagic;
  hetcclComm_t inner = nullptr;
  int blocking = 1;
  std::atomic<int> asyncError{0};  // the first failure of a stream-ordered call
  std::mutex textMu;
  std::string asyncText;  // and its message (it failed on the executor's thread)
  // PreMulSum ops by number (NCCL numbers them from ncclNumOps, 5): a call
  // takes its op's definition when it is enqueued, as NCCL does, so the op
  // may be destroyed as soon as the calls that name it returned.
  std::mutex opsMu;
  std::map<int, struct UserOp> ops;
  int nextOp = 5;
  std::chrono::steady_clock::time_point readyAt{};  // non-blocking init: in progress until then
  std::shared_ptr<Executor> exec = std::make_shared<Executor>();
};

std::atomic<long> selfCalls{0};
thread_local std::string lastError;

ncclResult_t fail(ncclResult_t r, const std::string& what) {
  lastError = what;
  return r;
}

bool ours(const void* comm) { return comm && static_cast<const EmuComm*>(comm)->magic == kMagic; }

hetcclDataType_t dt(int x) { return static_cast<hetcclDataType_t>(x); }
hetcclRedOp_t op(int x) { return static_cast<hetcclRedOp_t>(x); }

// An op as a call captures it: a built-in one, or a PreMulSum's definition.
struct OpSpec {
  int builtIn = -1;  // >= 0: that op
  UserOp user{};
};

bool specOf(void* comm, int o, OpSpec* out) {
  if (o >= 0 && o < 5) {
    out->builtIn = o;
    return true;
  }
  if (!ours(comm)) return false;
  auto* c = static_cast<EmuComm*>(comm);
  std::lock_guard<std::mutex> g(c->opsMu);
  auto it = c->ops.find(o);
  if (it == c->ops.end()) return false;
  out->user = it->second;
  return true;
}

// Runs call(op) on the inner communicator with the op made there for this
// call alone (PreMulSum) or built in.
template <typename F>
hetcclResult_t withSpec(hetcclComm_t in, const OpSpec& spec, F call) {
  if (spec.builtIn >= 0) return call(op(spec.builtIn));
  hetcclRedOp_t h = hetcclSum;
  const void* scalar = spec.user.residence == 0 ? spec.user.at : spec.user.value;
  hetcclResult_t r =
      hetcclRedOpCreatePreMulSum(&h, const_cast<void*>(scalar), spec.user.dt, hetcclScalarHostImmediate, in);
  if (r != hetcclSuccess) return r;
  r = call(h);
  hetcclRedOpDestroy(h, in);
  return r;
}

// The calls of one (group) call on one communicator, and its stream.
struct Pending {
  EmuComm* comm;
  void* stream;
  std::vector<std::function<hetcclResult_t(hetcclComm_t)>> calls;
};
struct Group {
  int depth = 0;
  std::vector<Pending> pending;
};
thread_local Group tGroup;

// Runs a communicator's calls as one hetccl group: now (NULL stream) or in
// the stream's order on the communicator's executor.
ncclResult_t submit(Pending p) {
  auto run = [calls = std::move(p.calls)](EmuComm* c) {
    hetcclResult_t r = hetcclGroupStart();
    for (const auto& call : calls)
      if (r == hetcclSuccess) r = call(c->inner);
    hetcclResult_t end = hetcclGroupEnd();
    if (r == hetcclSuccess) r = end;
    if (r != hetcclSuccess && r != hetcclInProgress) lastError = hetcclGetLastError(c->inner);
    return r == hetcclInProgress ? hetcclSuccess : r;
  };
  EmuComm* c = p.comm;
  if (!p.stream) return run(c);
  uint64_t ticket = c->exec->issue([c, run = std::move(run)]() mutable {
    hetcclResult_t r = run(c);
    int none = 0;
    if (r != hetcclSuccess && c->asyncError.compare_exchange_strong(none, r)) {
      std::lock_guard<std::mutex> g(c->textMu);
      c->asyncText = hetcclGetLastError(c->inner);
    }
  });
  emuEnqueue(static_cast<emuStream_t>(p.stream), [exec = c->exec, ticket] { exec->releaseAndWait(ticket); });
  return 0;
}

struct ConfigHead {
  size_t size;
  unsigned magic, version;
  int blocking;
};

}  // namespace

extern "C" {

long hetcclEmuNcclSelfCalls() { return selfCalls.load(); }

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(4, "ncclGetVersion: version is NULL");
  *version = kVersion;
  return 0;
}

const char* ncclGetErrorString(ncclResult_t r) { return hetcclGetErrorString(static_cast<hetcclResult_t>(r)); }
// The calling thread's last error; for a communicator whose stream-ordered
// call failed (on the executor's thread), that failure's message.
const char* ncclGetLastError(void* comm) {
  if (ours(comm)) {
    auto* c = static_cast<EmuComm*>(comm);
    if (c->asyncError.load() != 0) {
      std::lock_guard<std::mutex> g(c->textMu);
      lastError = c->asyncText;
    }
  }
  return lastError.c_str();
}

ncclResult_t ncclGetUniqueId(void* id) { return hetcclGetUniqueId(static_cast<hetcclUniqueId*>(id)); }

ncclResult_t ncclCommGetAsyncError(void* comm, ncclResult_t* err) {
  if (!ours(comm)) return fail(5, "ncclCommGetAsyncError: not a communicator of this library");
  selfCalls.fetch_add(1);
  auto* c = static_cast<EmuComm*>(comm);
  hetcclResult_t e = hetcclSuccess;
  hetcclResult_t r = hetcclCommGetAsyncError(c->inner, &e);
  if (r != hetcclSuccess) return r;
  if (e == hetcclSuccess) e = static_cast<hetcclResult_t>(c->asyncError.load());
  if (e == hetcclSuccess && std::chrono::steady_clock::now() < c->readyAt) e = hetcclInProgress;
  *err = e;
  return 0;
}

ncclResult_t ncclCommInitRankConfig(void** comm, int nranks, hetcclUniqueId id, int rank, void* config) {
  auto c = std::make_unique<EmuComm>();
  if (config) {
    ConfigHead h;
    memcpy(&h, config, sizeof(h));
    if (h.magic != 0xcafebeef) return fail(4, "ncclCommInitRankConfig: bad config magic");
    if (h.blocking != INT_MIN) c->blocking = h.blocking;
  }
  if (!c->blocking)
    c->readyAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(hetccl::settings::kEmuInitDelayMs.get());
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.device = "host";
  cfg.backend = "host";
  cfg.groupName = "emu-group";
  cfg.site = "emu-group";  // one vendor library, one site: the job's site map is not this communicator's
  cfg.blocking = c->blocking;
  hetcclResult_t r = hetcclCommInitRankConfig(&c->inner, nranks, id, rank, &cfg);
  if (r != hetcclSuccess && r != hetcclInProgress)
    return fail(r, std::string("ncclCommInitRankConfig: ") + hetcclGetLastError(nullptr));
  *comm = c.release();
  return r;
}

ncclResult_t ncclCommInitRank(void** comm, int nranks, hetcclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommDestroy(void* comm) {
  ncclResult_t e = 0;
  ncclResult_t r = ncclCommGetAsyncError(comm, &e);  // through the PLT, as NCCL's destroy checks its comm
  if (r != 0) return r;
  auto* c = static_cast<EmuComm*>(comm);
  c->exec->stop(true);  // its calls run first, when their streams reach them
  r = hetcclCommDestroy(c->inner);
  c->magic = 0;
  delete c;
  return r;
}

ncclResult_t ncclCommAbort(void* comm) {
  if (!ours(comm)) return fail(5, "ncclCommAbort: not a communicator of this library");
  auto* c = static_cast<EmuComm*>(comm);
  hetcclCommAbort(c->inner);  // ends what the executor runs
  c->exec->stop(false);       // streams that wait for its calls go on
  c->magic = 0;
  delete c;
  return 0;
}

ncclResult_t ncclCommCount(void* comm, int* n) {
  if (!ours(comm)) return fail(5, "ncclCommCount: not a communicator of this library");
  return hetcclCommCount(static_cast<EmuComm*>(comm)->inner, n);
}

ncclResult_t ncclCommUserRank(void* comm, int* r) {
  if (!ours(comm)) return fail(5, "ncclCommUserRank: not a communicator of this library");
  return hetcclCommUserRank(static_cast<EmuComm*>(comm)->inner, r);
}

ncclResult_t ncclGroupStart() {
  ++tGroup.depth;
  return 0;
}

ncclResult_t ncclGroupEnd() {
  if (tGroup.depth <= 0) return fail(5, "ncclGroupEnd without ncclGroupStart");
  if (--tGroup.depth > 0) return 0;
  std::vector<Pending> pending;
  pending.swap(tGroup.pending);
  ncclResult_t first = 0;
  for (Pending& p : pending) {
    ncclResult_t r = submit(std::move(p));
    if (first == 0) first = r;
  }
  return first;
}

}  // extern "C"

namespace {

// What NCCL's ncclEnqueueCheck does first: the communicator's async error
// and the library version, both through the PLT. Then the call joins the
// thread's group (a call outside one is a group of its own).
ncclResult_t enqueue(void* comm, void* stream, std::function<hetcclResult_t(hetcclComm_t)> call) {
  ncclResult_t e = 0;
  ncclResult_t r = ncclCommGetAsyncError(comm, &e);
  if (r != 0) return r;
  if (e != 0 && e != 7) return fail(e, "an earlier call failed");
  int v = 0;
  if (ncclGetVersion(&v) != 0 || v != kVersion) return fail(3, "ncclGetVersion did not reach this library");
  selfCalls.fetch_add(1);
  auto* c = static_cast<EmuComm*>(comm);
  ncclGroupStart();
  Pending* p = nullptr;
  for (Pending& q : tGroup.pending)
    if (q.comm == c) p = &q;
  if (!p) {
    tGroup.pending.push_back(Pending{c, stream, {}});
    p = &tGroup.pending.back();
  } else if (p->stream != stream) {
    ncclGroupEnd();
    return fail(5, "one group's calls on one communicator must use one stream here");
  }
  p->calls.push_back(std::move(call));
  return ncclGroupEnd();
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int t, int o, void* comm, void* st) {
  OpSpec sp;
  if (ours(comm) && !specOf(comm, o, &sp)) return fail(4, "ncclAllReduce: op " + std::to_string(o) + " unknown");
  return enqueue(comm, st, [=](hetcclComm_t in) {
    return withSpec(in, sp, [&](hetcclRedOp_t h) { return hetcclAllReduce(s, r, n, dt(t), h, in, nullptr); });
  });
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* st) {
  return enqueue(comm, st, [=](hetcclComm_t in) { return hetcclBroadcast(s, r, n, dt(t), root, in, nullptr); });
}
ncclResult_t ncclBcast(void* b, size_t n, int t, int root, void* comm, void* st) {
  return ncclBroadcast(b, b, n, t, root, comm, st);  // through the PLT, as NCCL's
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, int t, int o, int root, void* comm, void* st) {
  OpSpec sp;
  if (ours(comm) && !specOf(comm, o, &sp)) return fail(4, "ncclReduce: op " + std::to_string(o) + " unknown");
  return enqueue(comm, st, [=](hetcclComm_t in) {
    return withSpec(in, sp, [&](hetcclRedOp_t h) { return hetcclReduce(s, r, n, dt(t), h, root, in, nullptr); });
  });
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int t, void* comm, void* st) {
  return enqueue(comm, st, [=](hetcclComm_t in) { return hetcclAllGather(s, r, n, dt(t), in, nullptr); });
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int t, int o, void* comm, void* st) {
  OpSpec sp;
  if (ours(comm) && !specOf(comm, o, &sp)) return fail(4, "ncclReduceScatter: op " + std::to_string(o) + " unknown");
  return enqueue(comm, st, [=](hetcclComm_t in) {
    return withSpec(in, sp, [&](hetcclRedOp_t h) { return hetcclReduceScatter(s, r, n, dt(t), h, in, nullptr); });
  });
}
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, int t, void* comm, void* st) {
  return enqueue(comm, st, [=](hetcclComm_t in) { return hetcclAlltoAll(s, r, n, dt(t), in, nullptr); });
}
ncclResult_t ncclSend(const void* s, size_t n, int t, int peer, void* comm, void* st) {
  return enqueue(comm, st, [=](hetcclComm_t in) { return hetcclSend(s, n, dt(t), peer, in, nullptr); });
}
ncclResult_t ncclRecv(void* r, size_t n, int t, int peer, void* comm, void* st) {
  return enqueue(comm, st, [=](hetcclComm_t in) { return hetcclRecv(r, n, dt(t), peer, in, nullptr); });
}

// Device residence: the scalar is read when each call runs (from emu device
// memory, which is this process's), as NCCL reads a device scalar when its
// kernel runs; host immediate: read now.
ncclResult_t ncclRedOpCreatePreMulSum(int* o, void* scalar, int t, int residence, void* comm) {
  if (!ours(comm)) return fail(5, "ncclRedOpCreatePreMulSum: not a communicator of this library");
  if (!o || !scalar) return fail(4, "ncclRedOpCreatePreMulSum: NULL op or scalar");
  size_t bytes = t == 6 || t == 9 ? 2 : t == 7 ? 4 : t == 8 ? 8 : 0;  // half, bfloat16, float, double
  if (!bytes) return fail(4, "ncclRedOpCreatePreMulSum: data type " + std::to_string(t) + " is not a float type");
  if (residence != 0 && residence != 1) return fail(4, "ncclRedOpCreatePreMulSum: bad residence");
  UserOp u{dt(t), residence, scalar, {}};
  if (residence == 1) memcpy(u.value, scalar, bytes);  // ncclScalarHostImmediate: read now
  auto* c = static_cast<EmuComm*>(comm);
  std::lock_guard<std::mutex> g(c->opsMu);
  *o = c->nextOp++;
  c->ops[*o] = u;
  return 0;
}
ncclResult_t ncclRedOpDestroy(int o, void* comm) {
  if (!ours(comm)) return fail(5, "ncclRedOpDestroy: not a communicator of this library");
  auto* c = static_cast<EmuComm*>(comm);
  std::lock_guard<std::mutex> g(c->opsMu);
  if (c->ops.erase(o) == 0) return fail(4, "ncclRedOpDestroy: op " + std::to_string(o) + " is not a live PreMulSum op");
  return 0;
}

// Registration: handles that deregistration checks are its own.
ncclResult_t ncclCommRegister(void* comm, void* buff, size_t, void** handle) {
  if (!ours(comm)) return fail(5, "ncclCommRegister: not a communicator of this library");
  *handle = new const void*(buff);
  return 0;
}
ncclResult_t ncclCommDeregister(void* comm, void* handle) {
  ncclResult_t e = 0;
  if (ncclResult_t r = ncclCommGetAsyncError(comm, &e)) return r;
  delete static_cast<const void**>(handle);
  return 0;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  int v = 0;
  if (ncclGetVersion(&v) != 0 || v != kVersion) return fail(3, "ncclGetVersion did not reach this library");
  return emuMalloc(ptr, size) == emuSuccess ? 0 : fail(1, "emuMalloc failed");
}
ncclResult_t ncclMemFree(void* ptr) { return emuFree(ptr) == emuSuccess ? 0 : fail(1, "emuFree failed"); }

}  // extern "C"
