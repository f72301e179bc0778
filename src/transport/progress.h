// Shared bookkeeping of transport progress loops: abort checks, the no-progress
// timeout, and the errors that name the peer and what was awaited.
#pragma once

#include <atomic>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "transport/transport.h"

namespace hetccl {

class ProgressWatch {
 public:
  ProgressWatch(const std::atomic<bool>* abort, double timeoutS, const char* transport)
      : abort_(abort), timeout_(timeoutS), transport_(transport), lastUs_(clockUs()) {}

  void madeProgress() { lastUs_ = clockUs(); }

  // Throws if aborted, or if nothing moved for the timeout; `pending` names
  // one transfer still waiting (peer, direction, tag).
  void check(const Xfer& pending) const {
    if (abort_ && abort_->load(std::memory_order_relaxed))
      throwError(hetcclRemoteError,
                 std::string(transport_) + ": communicator aborted during " + pending.tag.describe());
    const double idle = (clockUs() - lastUs_) * 1e-6;
    if (idle >= timeout_)
      throwError(
          hetcclRemoteError,
          std::string(transport_) + ": timed out after " + std::to_string(static_cast<int>(timeout_)) +
              " s without progress in " + pending.tag.describe() + ": " +
              (pending.kind == Xfer::Kind::kSend ? "sending to" : "receiving from") + " rank " +
              std::to_string(pending.peer) + " (" + std::to_string(pending.done) + " of " +
              std::to_string(pending.bytes) + " bytes moved; that rank is stalled, in another call, " +
              (pending.tag.coll == static_cast<uint16_t>(CollKind::kSendRecv) ? "posted no matching send or receive, "
                                                                              : "") +
              "or itself waiting for another rank)");
  }

 private:
  const std::atomic<bool>* abort_;
  double timeout_;
  const char* transport_;
  double lastUs_;  // core/clock.h: read several times a call
};

// Whether process `pid` (of this host) is alive: not gone, not a zombie.
bool processAlive(int pid);

// The error for a received header that does not match the local call.
[[noreturn]] inline void throwMismatch(const char* transport, int myRank, const Xfer& x, const MsgTag& got) {
  if (got.sameCall(x.tag))
    throwError(hetcclInvalidUsage, std::string(transport) + ": rank " + std::to_string(myRank) + " expected " +
                                       std::to_string(x.tag.bytes) + " bytes from rank " + std::to_string(x.peer) +
                                       " in " + x.tag.describe() + " but it sent " + std::to_string(got.bytes) +
                                       " (ranks disagree on counts or group layout)");
  throwError(hetcclInvalidUsage, std::string(transport) + ": collective mismatch: rank " + std::to_string(myRank) +
                                     " is in " + x.tag.describe() + " but rank " + std::to_string(x.peer) + " is in " +
                                     got.describe());
}

}  // namespace hetccl
