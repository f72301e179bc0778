// A GPU rank's look at the other ranks on its host while one of its calls
// waits (Comm::checkHostRanks; core/process_watch.h says how a process is
// known). A GPU waits on flags in shared memory and in the vendor
// library's kernels, and neither ends when the rank that would have stored
// them dies: without this look a survivor learned of it at
// HETCCL_TIMEOUT_S. Ranks on other hosts are not watched here: the
// relay's and the transports' connections close when their process dies.
#include <string>

#include "comm/comm.h"
#include "core/log.h"
#include "device/event_wait.h"
#include "topology/peer.h"

namespace hetccl {

void Comm::watchHostRanks(const std::vector<PeerInfo>& peers, const std::vector<ProcessIdentity>& processes) {
  const uint64_t here = peers[rank_].hostHash;
  int onHost = 0;
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_ || peers[r].hostHash != here) continue;
    ++onHost;
    if (!hostRanks_.add(r, processes[r]))
      LOG_INFO(kInit,
               "rank %d: rank %d (pid %d) on this host is not watched (another pid namespace, or the pid names "
               "another process): a death of it is seen at HETCCL_TIMEOUT_S",
               rank_, r, static_cast<int>(processes[r].pid));
  }
  if (onHost > 0)
    LOG_INFO(kInit, "rank %d: watches %zu of %d other ranks on this host while its calls wait (%zu by pidfd)", rank_,
             hostRanks_.size(), onHost, hostRanks_.byPidfd());
  // Only with the device border, whose shared header says which ranks left
  // after their last call: without it a group mate that did its part of a
  // Reduce or Broadcast and exited would be taken for a dead one.
  if (stagingState_ && border_ && hostRanks_.size() > 0)
    stagingState_->setWaitCheck([this] {
      // The proxy's own transports see a dead rank of another group.
      checkHostRanks("the group steps of a staged call (vendor library)", [this](int r) { return inMyGroup(r); });
    });
}

void Comm::checkHostRanks(const std::string& call, const std::function<bool(int rank)>& waitsOn) {
  std::string text;
  std::string why;
  int32_t pid = 0;
  const int failed = border_ ? border_->failedRank(&why) : -1;
  if (failed >= 0 && failed != rank_) {
    // Another rank of this host failed (a dead peer of its own, a timeout):
    // the job's failure word. The vendor library's waits on that rank
    // would not end while it lives on (its abort tells no peer).
    text = call + ": rank " + std::to_string(failed) + "'s communicator failed (" + why + ")";
  } else {
    // A rank that marked its leaving ended after its last call: whatever
    // this call still waits for comes from a rank that lives.
    const int dead = hostRanks_.firstEnded(&pid, [&](int r) { return (!border_ || !border_->left(r)) && waitsOn(r); });
    if (dead < 0) return;
    // The rank and "died" first: peers get a shortened reason (a poisoned
    // transport's), which may in turn be quoted by theirs.
    text = "rank " + std::to_string(dead) + " died (pid " + std::to_string(pid) + " on host " + localHostName() +
           ", its process ended) while this rank's " + call + " waited for it";
  }
  // The job's failure word for every rank on this host, the transports
  // poisoned and the relay halted, so that every survivor's streams go on
  // too; then this rank's own waits, and the vendor library's.
  fail(hetcclRemoteError, text);
  releaseThenAbortLibrary();
  throw ProcessEndedError(hetcclRemoteError, text);
}

std::string Comm::withDeadHostRank(const std::string& text) const {
  int32_t pid = 0;
  const int dead = hostRanks_.firstEnded(&pid, [this](int r) { return !border_ || !border_->left(r); });
  if (dead < 0 || text.find("rank " + std::to_string(dead) + " died") != std::string::npos) return text;
  return "rank " + std::to_string(dead) + " died (pid " + std::to_string(pid) + " on host " + localHostName() + "); " +
         text;
}

void Comm::waitWatchingHostRanks(Event e, const std::string& call, const std::function<bool(int rank)>& waitsOn) {
  const std::string what = "waiting for a " + call;
  if (hostRanks_.size() == 0 && !border_) return waitEvent(*device_, e, opts_.timeoutS, &abort_, what.c_str());
  waitEventChecked(*device_, e, opts_.timeoutS, &abort_, what.c_str(),
                   [this, &call, &waitsOn] { checkHostRanks(call, waitsOn); });
}

}  // namespace hetccl
