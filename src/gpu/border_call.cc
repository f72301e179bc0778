#include "gpu/border_call.h"

#include <algorithm>
#include <string>

#include "observe/observed.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

namespace {
constexpr int kSlots = DeviceBorder::kSlots;

// A watched border call failed: the communicator records the failure (its
// asynchronous error, the peers told) before this rank's streams that wait
// on the border go on, so a program that syncs its stream and then asks
// hetcclCommGetAsyncError reads the failure. (Where a peer's abort or the
// border relay releases the streams, this rank's watch records it a moment
// later.)
[[noreturn]] void failThenRelease(Comm& comm, DeviceBorder& border, hetcclResult_t code, const std::string& text) {
  comm.fail(code, text);
  border.releaseAll();
  throwError(code, text);
}
}  // namespace

BorderCall::BorderCall(Comm& owner, DataType type, RedKind k, size_t callBytes)
    : comm(owner),
      border(*owner.deviceBorder()),
      dev(owner.device()),
      kernels(*owner.kernels()),
      dt(type),
      kind(k),
      elemBytes(dataTypeSize(type)) {
  if (!comm.observing() && !comm.flight().on()) return;
  if (callBytes >= kTimedMinBytes) {
    timed = true;
  } else if (StagingState* ds = comm.stagingState()) {
    const uint64_t w = ds->sampler().sample(kTimedSampleEvery);
    timed = w > 0;
    weight = static_cast<double>(w);
  }
}

BorderCall::~BorderCall() {
  border.commit();
  StagingState* ds = comm.stagingState();
  if (!ds) return;
  for (Event e : events) ds->events().give(e);
  for (Event e : {timedStart, timedEnd, callStart, callEnd})
    if (e) ds->events().giveTimed(e);
}

void BorderCall::check(int rc, const char* what) {
  if (rc != HETCCL_KERNELS_SUCCESS)
    throwError(rc == HETCCL_KERNELS_INVALID_ARGUMENT ? hetcclInvalidArgument : hetcclUnhandledDeviceError,
               std::string("device border: kernel '") + what + "' (" + kernels.kind + "): " + kernels.lastError());
}

Event BorderCall::event(Stream s) {
  Event e = comm.stagingState()->events().take();
  events.push_back(e);
  dev.recordEvent(e, s);
  return e;
}

void BorderCall::markStart(Stream caller) {
  if (timedStart || !timed) return;
  timedStart = comm.stagingState()->events().takeTimed();
  dev.recordEvent(timedStart, caller);
}

void BorderCall::markEnd(Stream caller) {
  if (!timedStart) return;
  if (!timedEnd) timedEnd = comm.stagingState()->events().takeTimed();
  dev.recordEvent(timedEnd, caller);  // again at a later join: the last one counts
}

Event BorderCall::startCall(Stream caller) {
  if (!timed || comm.topo().groupOfRank(comm.rank()).ranks.size() < 2) return nullptr;
  Event e = comm.stagingState()->events().takeTimed();
  dev.recordEvent(e, caller);
  return e;
}

void BorderCall::fold(uint8_t* out, const uint8_t* mine, size_t n, Stream s) {
  if (n == 0) return;
  auto v = [&](int g) -> const uint8_t* { return g == me() ? mine : scratchOf(g); };
  uint8_t* acc = (mine == out && me() != 0) ? scratchOf(0) : out;
  for (int g = 1; g < peers(); ++g) {
    uint8_t* to = g == peers() - 1 ? out : acc;
    check(kernels.reduce(to, g == 1 ? v(0) : acc, v(g), n, static_cast<int>(dt), static_cast<int>(kind), s), "reduce");
  }
}

void BorderCall::waitSlotFree(uint64_t seq, int slot, Stream s) {
  if (seq <= kSlots) return;
  for (int q = 0; q < peers(); ++q)
    if (q != me()) dev.streamWaitValue(s, border.ack(me(), q, slot), seq - kSlots);
}

void BorderCall::ackReads(uint64_t seq, int slot, Stream s) {
  for (int q = 0; q < peers(); ++q)
    if (q != me()) dev.streamWriteValue(s, border.ack(q, me(), slot), seq);
  // Every read of this use is announced: the relay may serve it now, while
  // the rest of the call is enqueued (a long call's streams would else wait
  // on the relay until the runtime's queue stops this thread).
  border.commit(seq);
}

uint64_t BorderCall::take(int* slot) {
  const uint64_t seq = border.nextSeq();
  *slot = static_cast<int>(seq % kSlots);
  return seq;
}

void BorderCall::fork(Stream caller) {
  markStart(caller);
  Event start = event(caller);
  dev.streamWaitEvent(border.outStream(), start);
  dev.streamWaitEvent(border.inStream(), start);
}

void BorderCall::join(Stream caller) {
  dev.streamWaitEvent(caller, event(border.outStream()));
  dev.streamWaitEvent(caller, event(border.inStream()));
  markEnd(caller);
}

void BorderCall::watch(Stream caller, const char* what, size_t bytes, uint64_t firstSeq, int writer, bool results) {
  const uint64_t lastSeq = border.seq() > firstSeq ? border.seq() : 0;
  LOG_TRACE(kColl, "device border %s of %zu bytes, border sequence %llu..%llu", what, bytes,
            static_cast<unsigned long long>(firstSeq + 1), static_cast<unsigned long long>(lastSeq));
  if (!readReady.empty() || !readDone.empty()) {  // the peers this rank waited on, each at its last read
    watch(caller, what, bytes, [&border = border, ready = readReady, done = readDone](bool* poisoned) {
      const int q = border.behindReads(ready, done, poisoned);
      return q < 0 ? -1 : border.peerRank(q);
    });
    return;
  }
  watch(caller, what, bytes, [&border = border, lastSeq, writer, results](bool* poisoned) {
    *poisoned = false;
    const int q = lastSeq ? border.behind(lastSeq, results, poisoned, writer) : -1;
    return q < 0 ? -1 : border.peerRank(q);
  });
}

void BorderCall::watch(Stream caller, const char* what, size_t bytes, std::function<int(bool*)> behind) {
  StagingState& ds = *comm.stagingState();
  if (timedStart && !timedEnd) markEnd(caller);
  const Event start = timedStart, stop = timedEnd, callFrom = callStart;
  if (callFrom) {
    callEnd = ds.events().takeTimed();
    dev.recordEvent(callEnd, caller);
  }
  const Event callTo = callEnd;
  Event end = event(caller);
  std::string name = what;
  comm.watch(
      [&comm = comm, &border = border, start, stop, callFrom, callTo, end, behind = std::move(behind), name, bytes,
       sent = sent, weight = weight] {
        try {
          // A dead rank of this group holds the vendor library's steps; a
          // border peer, this call only while its streams wait for its stores.
          comm.waitWatchingHostRanks(end, "device border " + name + " of " + std::to_string(bytes) + " bytes",
                                     [&comm, &behind](int r) {
                                       bool poisoned = false;
                                       return comm.inMyGroup(r) || behind(&poisoned) == r;
                                     });
        } catch (const ProcessEndedError&) {
          throw;  // the communicator failed naming the dead rank, every wait released
        } catch (const Error& e) {
          bool poisoned = false;
          const int who = behind(&poisoned);  // before the release
          if (comm.abortFlag().load()) {
            border.releaseAll();
            throw;
          }
          const std::string text = who < 0
                                       ? std::string(e.what())
                                       : "device border " + name + " of " + std::to_string(bytes) + " bytes: rank " +
                                             std::to_string(who) + " did not store its share within " +
                                             std::to_string(static_cast<int>(comm.options().timeoutS)) +
                                             " s (HETCCL_TIMEOUT_S); it died, stalled or left the job";
          // The other ranks learn of it before any stream of theirs that
          // waits on this rank goes on.
          border.markFailed("rank " + std::to_string(comm.rank()) + ": " + text);
          failThenRelease(comm, border, who < 0 ? e.code() : hetcclRemoteError, text);
        }
        bool poisoned = false;
        behind(&poisoned);
        std::string why;
        const int failed = border.failedRank(&why);
        // A peer failed: this rank's streams may wait in later calls on
        // flags that peer no longer stores (or a stream of it lowered again).
        if (failed >= 0 && failed != comm.rank())
          failThenRelease(comm, border, hetcclRemoteError,
                          "device border " + name + ": rank " + std::to_string(failed) + "'s communicator failed (" +
                              why + "); the result is not valid");
        if (poisoned) {
          const std::string relay = border.relayError();
          failThenRelease(comm, border, hetcclRemoteError,
                          "device border " + name +
                              (relay.empty() ? std::string(": a border peer released the border (it failed or aborted)")
                                             : ": " + relay) +
                              "; the result is not valid");
        }
        countBorderBytes(comm.metrics(), CallMetrics::kBorderHost, sent);  // the border is this host's memory
        const double borderUs = start ? comm.device().elapsedUs(start, stop) : 0;
        if (start) countStepTime(comm.metrics(), CallMetrics::kBorderHost, borderUs, weight);
        // The rest of the call's device time: its group steps (and the
        // kernels' local work around them: scaling, division).
        if (callFrom)
          countStepTime(comm.metrics(), CallMetrics::kGroup,
                        std::max(0.0, comm.device().elapsedUs(callFrom, callTo) - borderUs), weight);
      },
      [&ds, events = events, start, stop, callFrom, callTo] {
        for (Event e : events) ds.events().give(e);
        for (Event e : {start, stop, callFrom, callTo})
          if (e) ds.events().giveTimed(e);
      });
  // The watch owns them now.
  events.clear();
  timedStart = timedEnd = callStart = callEnd = nullptr;
}

}  // namespace hetccl
