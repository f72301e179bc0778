// extern "C" entry points of the collectives, point-to-point and group calls:
// argument checks, then run now or queue until hetcclGroupEnd.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "algorithm/coll.h"
#include "gpu/captured_call.h"
#include "gpu/enqueue.h"
#include "gpu/vendor_calls.h"
#include "api/args.h"
#include "api/comm_create.h"
#include "api/guard.h"
#include "observe/observed.h"
#include "core/log.h"

using namespace hetccl;

namespace {

// Records `calls` in the communicator's flight recorder; returns the first
// one's number for FlightRecorder::finish. atUs: as FlightRecorder::issue.
uint64_t recordCalls(hetcclComm& comm, std::span<const CollArgs> calls, FlightRecorder::State state,
                     double* atUs = nullptr) {
  if (!comm.flight().on()) return 0;
  // A GPU rank's calls inside one group end on the stream, unseen here.
  const bool willEnd = state != FlightRecorder::State::kEnqueued || comm.topo().ngroups() > 1;
  auto of = [](const CollArgs& a) {
    return FlightRecorder::Call{a.kind, a.isSend,    a.count,
                                a.dt,   a.op.userOp, a.kind == CollKind::kSendRecv ? a.peer : a.root};
  };
  if (calls.size() == 1) {  // the common case, without an allocation
    const FlightRecorder::Call one = of(calls[0]);
    return comm.flight().issue({&one, 1}, state, willEnd, atUs);
  }
  std::vector<FlightRecorder::Call> fc;
  fc.reserve(calls.size());
  for (const CollArgs& a : calls) fc.push_back(of(a));
  return comm.flight().issue(fc, state, willEnd, atUs);
}

// Runs body (the calls recorded from `first` on) and records how it ended,
// with the group and border steps it ran on this thread: inside
// failOnError, so that the dump a failure writes shows the call failed.
// ends: body runs the calls to their end (host ranks); else (a GPU rank's
// enqueue) only a failure ends them here. startUs: the calls' start where
// they run now, on the thread that issued them (their steps may share its
// clock reading: observe/observed.h), else 0.
template <class F>
void recorded(hetcclComm& comm, uint64_t first, size_t n, bool ends, double startUs, F&& body) {
  StepScope steps(startUs);
  try {
    body();
  } catch (const Error& e) {
    comm.flight().finish(first, n, e.code(), &steps.tally);
    throw;
  } catch (...) {
    comm.flight().finish(first, n, hetcclInternalError, &steps.tally);
    throw;
  }
  if (ends) comm.flight().finish(first, n, hetcclSuccess, &steps.tally, steps.soleStepEndUs());
}

// GPU calls across groups: the proxy runs each staged call's plan, and the
// watcher watches each border call to its end event, each in order; a job
// queued on the proxy after the calls, which then queues one on the
// watcher, runs there once their part across groups is done, and records
// them so (a failure of either thread drops it: then they failed). Their
// steps' tally is the sum of what the two threads ran for them. One group's
// calls stay "enqueued": their end is the vendor library's, on the stream.
void finishAfterProxy(hetcclComm& comm, uint64_t first, size_t n) {
  hetcclComm* c = &comm;
  // steps: what the proxy's jobs ran for the calls; the thread that ends
  // them adds its own (the watcher's watches).
  auto end = [c, first, n](CallMetrics::Tally steps, bool ok) {
    steps += takeStepTally();
    const hetcclResult_t e = c->asyncError();
    c->flight().finish(first, n, ok ? hetcclSuccess : e == hetcclSuccess ? hetcclRemoteError : e, &steps);
  };
  auto handed = std::make_shared<bool>(false);
  comm.proxy().submit(
      [c, end, handed] {
        *handed = true;
        const CallMetrics::Tally launched = takeStepTally();
        auto ran = std::make_shared<bool>(false);
        c->watch([end, launched, ran] { *ran = true, end(launched, true); },  // the watcher, from this thread
                 [end, launched, ran] {
                   if (!*ran) end(launched, false);
                 });
      },
      [end, handed] {
        if (!*handed) end({}, false);
      });
}

// Host ranks' calls: through the transports, or the group alone.
void countHostCalls(hetcclComm& comm, size_t n) {
  comm.countCalls(comm.topo().ngroups() == 1 ? hetcclPathNone : hetcclPathHost, n);
}

// Refuses a call on a communicator that an earlier call left failed.
void checkUsable(hetcclComm* comm) {
  if (comm->asyncError() != hetcclSuccess)
    throwError(comm->asyncError(), "an earlier call on this communicator failed (" + comm->failureText() +
                                       "); it must be aborted or destroyed");
  hetcclResult_t pending = comm->proxy().failure();
  if (pending != hetcclSuccess && pending != hetcclInProgress)
    throwError(pending, "an earlier non-blocking call failed (" + comm->proxy().errorText() +
                            "); the communicator must be aborted or destroyed");
}

// Runs the calls of one hetccl call or one group on one communicator: GPU
// ranks enqueue them in stream order; host ranks run them on this thread
// (blocking, mayWait) or on the proxy (non-blocking ranks, after init and
// earlier calls; blocking ranks of a group over several communicators, all
// at once while the group waits: mayWait false). A failure fails the
// communicator. Returns whether non-blocking work was queued. Under a CommRef.
bool dispatchCalls(hetcclComm* comm, std::span<const CollArgs> calls, bool mayWait) {
  const bool blocking = comm->options().blocking;
  const bool waitedOnProxy = blocking && !mayWait && !comm->isGpuRank();
  std::optional<ExclusiveUse> use;
  if (!waitedOnProxy) use.emplace(*comm);  // that one takes it on the proxy, for the whole run
  checkUsable(comm);
  if (comm->isGpuRank()) {  // GPU rank: enqueue in stream order, return at once
    checkReady(comm);
    // A call across groups captured into a graph runs at every replay
    // (gpu/captured_call.h): its record ends with the capture.
    const bool captured = comm->topo().ngroups() > 1 && anyCaptured(*comm, calls);
    const uint64_t first = recordCalls(*comm, calls, FlightRecorder::State::kEnqueued);
    bool endsItsRecord = false;  // handed off at stream time: the proxy ends the record when it ran the calls
    failOnError(*comm, [&] {
      recorded(*comm, first, calls.size(), captured, 0,
               [&] { endsItsRecord = enqueueDeviceCalls(*comm, calls, first); });
    });
    if (first && comm->topo().ngroups() > 1 && !captured && !endsItsRecord)
      finishAfterProxy(*comm, first, calls.size());
    return false;
  }
  if (blocking) checkReady(comm);  // a non-blocking rank's init may still run on the proxy
  double startUs = 0;
  const uint64_t first = recordCalls(*comm, calls, FlightRecorder::State::kIssued, &startUs);
  auto run = [comm, first](const std::vector<CollArgs>& cs, double now) {
    countHostCalls(*comm, cs.size());  // the topology is known once init ran
    recorded(*comm, first, cs.size(), true, now, [&] { runCalls(hostPlan(*comm), cs); });
  };
  std::vector<CollArgs> owned(calls.begin(), calls.end());  // what the plans and the proxy's jobs take
  if (blocking && mayWait) {                                // on this thread
    failOnError(*comm, [&] { run(owned, startUs); });
    return false;
  }
  if (waitedOnProxy) {
    comm->proxy().submit([comm, run, calls = std::move(owned)] {  // the caller waits for it (runTogether)
      ExclusiveUse inCall(*comm);
      run(calls, 0);
    });
    return false;
  }
  comm->proxy().submit([run, calls = std::move(owned)] { run(calls, 0); });
  return true;
}

// A group over several communicators, from one thread: host ranks' calls run
// on their communicators' proxies, all at once, and the group waits for the
// blocking ones; GPU ranks' enqueue in stream order (one vendor group around
// all of them, as NCCL needs when one thread drives several devices).
// Returns whether non-blocking work was queued. Throws the first failure.
bool runTogether(const std::vector<hetcclComm*>& comms,
                 const std::function<std::vector<CollArgs>(hetcclComm*)>& callsOf) {
  std::vector<std::unique_ptr<CommRef>> refs;
  for (hetcclComm* c : comms) refs.push_back(std::make_unique<CommRef>(c));
  // The vendor library's group spans every one-group GPU communicator here.
  std::vector<Backend*> vendorGroups;
  struct EndVendorGroups {
    std::vector<Backend*>& v;
    ~EndVendorGroups() {
      for (auto it = v.rbegin(); it != v.rend(); ++it) {
        try {
          (*it)->groupEnd();
        } catch (const Error& e) {
          LOG_WARN(kColl, "group of several communicators: ending the vendor group: %s", e.what());
        }
      }
    }
  } endVendorGroups{vendorGroups};
  for (hetcclComm* c : comms)
    if (c->isGpuRank() && c->ready() && c->topo().ngroups() == 1 && c->asyncError() == hetcclSuccess) {
      c->groupBackend().groupStart();
      vendorGroups.push_back(&c->groupBackend());
    }
  // That group is this thread's, as NCCL's is: the vendor calls of the
  // other communicators (the device border's group steps) go through their
  // proxies meanwhile (gpu/vendor_calls.h).
  std::optional<OpenVendorGroup> open;
  if (!vendorGroups.empty()) open.emplace();
  bool anyNonBlocking = false;
  std::vector<hetcclComm*> waitFor;
  for (hetcclComm* comm : comms) {
    std::vector<CollArgs> calls = callsOf(comm);
    hetcclResult_t r = guard(comm, "hetcclGroupEnd", [&] {
      if (dispatchCalls(comm, calls, false))
        anyNonBlocking = true;
      else if (!comm->isGpuRank())
        waitFor.push_back(comm);  // a blocking host rank's calls, on its proxy
    });
    if (r != hetcclSuccess) {
      for (hetcclComm* w : waitFor) w->proxy().drain();
      throw Error(r, lastErrorText(comm));
    }
  }
  std::string firstError;
  hetcclResult_t firstCode = hetcclSuccess;
  for (hetcclComm* w : waitFor) {
    w->proxy().drain();
    hetcclResult_t r = w->proxy().status();
    if (r != hetcclSuccess && firstCode == hetcclSuccess) {
      firstCode = r;
      firstError = "rank " + std::to_string(w->rank()) + ": " + w->proxy().errorText();
    }
  }
  if (firstCode != hetcclSuccess) throwError(firstCode, firstError);
  return anyNonBlocking;
}

hetcclResult_t submit(hetcclComm* comm, const char* fn, CollArgs a, hetcclRedOp_t op, bool reduces) {
  bool queued = false;
  hetcclResult_t r = guard(comm, fn, [&] {
    CommRef ref(comm);
    checkArgs(comm, a, op, reduces);
    if (threadGroup().depth > 0) {
      threadGroup().calls.push_back(PendingCall{comm, a});
      return;
    }
    queued = dispatchCalls(comm, {&a, 1}, true);
  });
  return (r == hetcclSuccess && queued) ? hetcclInProgress : r;
}

// `rootOrPeer`: a rooted collective's root, send/recv's peer.
CollArgs args(CollKind k, const void* s, void* r, size_t count, hetcclDataType_t dt, int rootOrPeer,
              hetcclStream_t st) {
  CollArgs a;
  a.kind = k;
  a.send = s;
  a.recv = r;
  a.count = count;
  a.dt = dt;
  (k == CollKind::kSendRecv ? a.peer : a.root) = rootOrPeer;
  a.stream = st;
  return a;
}

}  // namespace

extern "C" {

hetcclResult_t hetcclAllReduce(const void* s, void* r, size_t count, hetcclDataType_t dt, hetcclRedOp_t op,
                               hetcclComm_t comm, hetcclStream_t st) {
  return submit(comm, "hetcclAllReduce", args(CollKind::kAllReduce, s, r, count, dt, -1, st), op, true);
}

hetcclResult_t hetcclBroadcast(const void* s, void* r, size_t count, hetcclDataType_t dt, int root, hetcclComm_t comm,
                               hetcclStream_t st) {
  return submit(comm, "hetcclBroadcast", args(CollKind::kBroadcast, s, r, count, dt, root, st), hetcclSum, false);
}

hetcclResult_t hetcclReduce(const void* s, void* r, size_t count, hetcclDataType_t dt, hetcclRedOp_t op, int root,
                            hetcclComm_t comm, hetcclStream_t st) {
  return submit(comm, "hetcclReduce", args(CollKind::kReduce, s, r, count, dt, root, st), op, true);
}

hetcclResult_t hetcclAllGather(const void* s, void* r, size_t sendcount, hetcclDataType_t dt, hetcclComm_t comm,
                               hetcclStream_t st) {
  return submit(comm, "hetcclAllGather", args(CollKind::kAllGather, s, r, sendcount, dt, -1, st), hetcclSum, false);
}

hetcclResult_t hetcclReduceScatter(const void* s, void* r, size_t recvcount, hetcclDataType_t dt, hetcclRedOp_t op,
                                   hetcclComm_t comm, hetcclStream_t st) {
  return submit(comm, "hetcclReduceScatter", args(CollKind::kReduceScatter, s, r, recvcount, dt, -1, st), op, true);
}

hetcclResult_t hetcclAlltoAll(const void* s, void* r, size_t count, hetcclDataType_t dt, hetcclComm_t comm,
                              hetcclStream_t st) {
  return submit(comm, "hetcclAlltoAll", args(CollKind::kAlltoAll, s, r, count, dt, -1, st), hetcclSum, false);
}

hetcclResult_t hetcclGather(const void* s, void* r, size_t count, hetcclDataType_t dt, int root, hetcclComm_t comm,
                            hetcclStream_t st) {
  return submit(comm, "hetcclGather", args(CollKind::kGather, s, r, count, dt, root, st), hetcclSum, false);
}

hetcclResult_t hetcclScatter(const void* s, void* r, size_t count, hetcclDataType_t dt, int root, hetcclComm_t comm,
                             hetcclStream_t st) {
  return submit(comm, "hetcclScatter", args(CollKind::kScatter, s, r, count, dt, root, st), hetcclSum, false);
}

hetcclResult_t hetcclSend(const void* s, size_t count, hetcclDataType_t dt, int peer, hetcclComm_t comm,
                          hetcclStream_t st) {
  hetcclResult_t r =
      guard(comm, "hetcclSend", [&] { HETCCL_CHECK_ARG(s || count == 0, "sendbuff is NULL with count > 0"); });
  if (r != hetcclSuccess) return r;
  CollArgs a = args(CollKind::kSendRecv, s, nullptr, count, dt, peer, st);
  a.isSend = true;
  return submit(comm, "hetcclSend", a, hetcclSum, false);
}

hetcclResult_t hetcclRecv(void* rb, size_t count, hetcclDataType_t dt, int peer, hetcclComm_t comm, hetcclStream_t st) {
  hetcclResult_t r =
      guard(comm, "hetcclRecv", [&] { HETCCL_CHECK_ARG(rb || count == 0, "recvbuff is NULL with count > 0"); });
  if (r != hetcclSuccess) return r;
  return submit(comm, "hetcclRecv", args(CollKind::kSendRecv, nullptr, rb, count, dt, peer, st), hetcclSum, false);
}

hetcclResult_t hetcclGroupStart(void) {
  ++threadGroup().depth;
  return hetcclSuccess;
}

hetcclResult_t hetcclGroupEnd(void) {
  bool anyNonBlocking = false;
  hetcclResult_t r = guard(nullptr, "hetcclGroupEnd", [&] {
    GroupState& g = threadGroup();
    HETCCL_CHECK_USAGE(g.depth > 0, "hetcclGroupEnd without hetcclGroupStart");
    if (--g.depth > 0) return;
    std::vector<PendingCall> ops;
    ops.swap(g.calls);
    // The vector's room goes back to the thread for its next group: no
    // allocation for a group of send/recv like the last.
    struct GiveBack {
      std::vector<PendingCall>& ops;
      GroupState& g;
      ~GiveBack() {
        ops.clear();
        if (g.calls.empty()) g.calls.swap(ops);
      }
    } giveBack{ops, g};
    std::vector<PendingInit> inits;
    inits.swap(g.inits);
    // Communicators created in the group first: calls on them follow.
    anyNonBlocking = runPendingInits(inits);
    if (ops.empty()) return;
    // Per communicator, in order of first use: its collectives in call order,
    // then all its point-to-point operations together.
    hetcclComm* const only = ops.front().comm;
    if (std::all_of(ops.begin(), ops.end(), [&](const PendingCall& p) { return p.comm == only; })) {
      // One communicator, the common group: its calls in a vector this
      // thread keeps (nothing that dispatchCalls runs on this thread ends a
      // group).
      thread_local std::vector<CollArgs> calls;
      calls.clear();
      for (const PendingCall& p : ops) calls.push_back(p.args);
      hetcclResult_t r = guard(only, "hetcclGroupEnd", [&] {
        CommRef ref(only);
        if (dispatchCalls(only, calls, true)) anyNonBlocking = true;
      });
      if (r != hetcclSuccess) throw Error(r, lastErrorText(only));
      return;
    }
    std::vector<hetcclComm*> comms;
    for (const PendingCall& p : ops)
      if (std::find(comms.begin(), comms.end(), p.comm) == comms.end()) comms.push_back(p.comm);
    auto callsOf = [&](hetcclComm* comm) {
      std::vector<CollArgs> calls;
      for (const PendingCall& p : ops)
        if (p.comm == comm) calls.push_back(p.args);
      return calls;
    };
    // One thread drives several ranks (ncclCommInitAll's pattern): their
    // calls must run at once, or the first would wait for the others.
    if (runTogether(comms, callsOf)) anyNonBlocking = true;
  });
  return (r == hetcclSuccess && anyNonBlocking) ? hetcclInProgress : r;
}

}  // extern "C"
