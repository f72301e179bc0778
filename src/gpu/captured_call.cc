#include "gpu/captured_call.h"

#include <algorithm>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "gpu/border_coll.h"
#include "gpu/staged_copies.h"

namespace hetccl {
namespace {

// One call (or group call) of the path above. Owned by its graph (a user
// object), or by its own stream's last host function where not captured.
struct HandedOffCall {
  std::shared_ptr<CapturedRegistry::Shared> reg;
  Comm* comm = nullptr;
  uint8_t* block = nullptr;  // pinned: the host copies, then the flag
  size_t blockBytes = 0;
  uint64_t* flag = nullptr;
  std::vector<CollArgs> host;  // the calls on the host copies
  bool captured = false;       // owned by a graph (else by its stream's last host function)
  // Under reg->mu: a launch's call is with the proxy (its job reads this
  // call and its block until the job's end), and the call was dropped
  // meanwhile (an abort released its stream, or its graph went): the job's
  // end frees it then.
  bool inProxy = false;
  bool dropped = false;
  // An eager call's first flight record (0: none, or captured: those end
  // at capture), finished when the proxy has run the call; `ran` is set by
  // the proxy's job and read by its end, on the proxy's thread.
  uint64_t record = 0;
  size_t recorded = 0;
  bool ran = false;
};

void storeFlag(uint64_t* flag, uint64_t v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

// The host function, at every replay (on a runtime thread: it calls no
// runtime function). The registry's lock keeps it from handing a call to a
// communicator that was aborted or is going: the flag then releases the
// stream at once (what it copies out is not a result; the communicator
// reports the failure). A replay's flag is reset here, not by the stream:
// the previous replay of this call has copied out before this host
// function runs (stream order; launches of one exec never overlap), so no
// wait of it can see the reset.
// Under reg->mu: the call is gone; its block goes to the spare ones, for
// the next calls (freed with the registry).
void releaseLocked(std::unique_ptr<HandedOffCall> h) {
  h->reg->flags.erase(h->flag);
  if (h->reg->gone)  // the communicator went first: its runtime with it
    LOG_WARN(kColl, "a graph holding calls across groups outlived their communicator: %p stays allocated",
             static_cast<void*>(h->block));
  else
    h->reg->spare.emplace(h->blockBytes, h->block);
}

void handOff(void* p) {
  auto* h = static_cast<HandedOffCall*>(p);
  std::lock_guard<std::mutex> g(h->reg->mu);
  if (!h->reg->open) return storeFlag(h->flag, kFlagReleased);
  Comm& c = *h->comm;
  if (h->inProxy) {
    // Another launch of this graph (an exec of it on another stream) still
    // has the call: both would use one block and one flag. The flag is left
    // to that launch's end, which releases both streams.
    c.fail(hetcclInvalidUsage, "two launches of one graph holding calls across groups (" +
                                   std::to_string(h->host.size()) +
                                   " calls) overlapped; launch its graph execs one after the other");
    return;
  }
  storeFlag(h->flag, 0);
  h->inProxy = true;
  StagingState& ds = *c.stagingState();
  ds.stagedQueued();
  c.proxy().submit(
      [h] {
        runStaged(*h->comm, h->host, {});
        h->ran = true;
      },
      [h, &ds] {
        ds.stagedRan();
        if (h->record) {
          const hetcclResult_t e = h->comm->asyncError();
          h->comm->flight().finish(h->record, h->recorded,
                                   h->ran               ? hetcclSuccess
                                   : e == hetcclSuccess ? hetcclRemoteError
                                                        : e);
        }
        std::shared_ptr<CapturedRegistry::Shared> reg = h->reg;
        std::lock_guard<std::mutex> g(reg->mu);
        h->inProxy = false;
        storeFlag(h->flag, 1);  // its stream goes on, and may drop it
        if (h->dropped) releaseLocked(std::unique_ptr<HandedOffCall>(h));
      });
}

// The graph's user object destructor, or the last host function of a call
// not captured: on a runtime thread, which must not call the runtime, so
// the block is kept for later calls. A call still with the proxy (its
// stream released by an abort) is released at the proxy job's end instead.
void dropCall(void* p) {
  auto* h = static_cast<HandedOffCall*>(p);
  std::shared_ptr<CapturedRegistry::Shared> reg = h->reg;
  std::lock_guard<std::mutex> g(reg->mu);
  if (h->inProxy) {
    h->dropped = true;
    return;
  }
  releaseLocked(std::unique_ptr<HandedOffCall>(h));
}

std::string describe(const std::vector<CollArgs>& calls) {
  std::string s;
  for (const CollArgs& a : calls)
    s += std::string(s.empty() ? "" : ", ") + collKindName(a.kind) + " of " + std::to_string(a.count) + " " +
         dataTypeName(a.dt);
  return s;
}

}  // namespace

bool anyCaptured(Comm& c, std::span<const CollArgs> calls) {
  return std::any_of(calls.begin(), calls.end(), [&](const CollArgs& a) { return c.device().capturing(a.stream); });
}

void enqueueHandedOffCalls(Comm& c, const std::vector<CollArgs>& calls, bool captured, uint64_t record) {
  StagingState& ds = *c.stagingState();
  DeviceRuntime& d = c.device();
  const Stream s = calls.front().stream;
  if (captured) {
    for (const CollArgs& a : calls)
      if (a.stream != s)
        throwRefused(hetcclInvalidUsage,
                     "a group of calls across groups captured into a graph names several streams (" + describe(calls) +
                         "); capture them on one stream");
    if (!d.waitValueOnDevice())
      throwRefused(hetcclInvalidUsage,
                   std::string("calls across groups cannot be captured on this ") + d.kind() +
                       " device: its stream wait-value runs as a host function, which a graph cannot replay");
    for (const CollArgs& a : calls)
      if (takesDeviceBorder(c, a))
        LOG_INFO(kColl,
                 "captured %s of %zu bytes: staged through pinned memory at every replay (the device border "
                 "takes no captured calls yet)",
                 collKindName(a.kind), a.count * dataTypeSize(a.dt));
  }
  const size_t bytes = (layoutHostCopies(c, calls, nullptr) + 255) & ~size_t{255};
  auto h = std::make_unique<HandedOffCall>();
  h->reg = ds.captured().shared();
  h->comm = &c;
  h->captured = captured;
  if (!captured) h->record = record, h->recorded = calls.size();
  // A block of a call gone where one is large enough, else one allocated
  // now (in relaxed capture mode where captured). Blocks are never freed on
  // the way: freeing pinned memory waits for the whole device (the calling
  // thread must not), and would invalidate a capture under way.
  h->block = static_cast<uint8_t*>(ds.captured().takeSpare(bytes + 64, &h->blockBytes));
  if (!h->block) {
    h->blockBytes = bytes + 64;
    h->block = static_cast<uint8_t*>(d.allocPinned(h->blockBytes));
  }
  h->flag = reinterpret_cast<uint64_t*>(h->block + bytes);
  storeFlag(h->flag, 0);
  HandedOffCall* raw = h.get();
  if (captured) {
    // Not tied: the block is kept for later calls (freeing it now, during
    // the capture, would invalidate the capture).
    auto untie = [&] {
      std::lock_guard<std::mutex> g(h->reg->mu);
      h->reg->spare.emplace(h->blockBytes, h->block);
    };
    bool tied = false;
    try {
      tied = d.tieToCapture(s, dropCall, raw);
    } catch (...) {
      untie();
      throw;
    }
    if (!tied) {
      untie();
      throwRefused(hetcclInvalidUsage, std::string("calls across groups (") + describe(calls) +
                                           ") cannot be captured on this " + d.kind() +
                                           " runtime: it has no user objects (cudaUserObjectCreate, "
                                           "hipUserObjectCreate from ROCm 5.3) to tie their staging to the graph");
    }
  }
  {
    std::lock_guard<std::mutex> g(h->reg->mu);
    h->reg->flags.insert(h->flag);
    if (captured) h->reg->captureSeen = true;
  }
  // From here on the graph's (captured) or its stream's last host
  // function's: a device error below leaves it allocated rather than freed
  // under a host function already enqueued.
  h.release();
  std::vector<HostCopy> ms = stageIn(c, calls, raw->block);
  for (const HostCopy& m : ms) raw->host.push_back(m.host);
  d.launchHostFunc(s, handOff, raw);
  d.streamWaitValue(s, raw->flag, 1);
  stageOut(c, ms);
  if (!captured) d.launchHostFunc(s, dropCall, raw);
  c.countCalls(hetcclPathStaged, calls.size());
  LOG_TRACE(kColl, "%s %s: handed to the proxy when the stream reaches it", captured ? "captured" : "eager",
            describe(calls).c_str());
}

}  // namespace hetccl
