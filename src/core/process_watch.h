// Whether the processes of other ranks on this host still run, without
// waiting: a GPU rank's call waits on its device (stream waits on flags in
// shared memory, the vendor library's kernels), which never learns that a
// peer died, so the communicator asks here while a call waits.
//
// A process is known by its pid, its pid namespace and its start time (in
// clock ticks since boot): a rank watches another only where both run in
// one pid namespace and the pid still names the process that published
// them, so neither a pid reused by a new process nor ranks of different
// containers that share /dev/shm are taken for the peer. It is watched
// through a pidfd (pidfd_open, Linux 5.3) that becomes readable once the
// process ended, or where pidfd_open is refused (old kernels, seccomp)
// through /proc/<pid>/stat: gone, another start time, or a zombie. A
// stopped or stalled process has not ended.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/error.h"

namespace hetccl {

struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t pidNamespace = 0;  // the inode of /proc/self/ns/pid (0: unknown)
  uint64_t startTicks = 0;    // field 22 of /proc/<pid>/stat (0: unknown)
  // This process.
  static ProcessIdentity self();
};

// The start time of `pid` as /proc reads it now, or 0 where it has none
// (gone, or not in this pid namespace). *zombie: it ended, unreaped.
// *gone (if given): 0 because the process is known to be gone (no
// /proc entry), not because /proc could not be read.
uint64_t processStartTicks(int32_t pid, bool* zombie, bool* gone = nullptr);

// A call ended because a watched rank's process ended (the communicator
// failed first, naming it).
class ProcessEndedError : public Error {
 public:
  using Error::Error;
};

class ProcessWatch {
 public:
  // pidfds false: through /proc alone (what a kernel or a seccomp profile
  // without pidfd_open gives; tests).
  explicit ProcessWatch(bool pidfds = true) : pidfds_(pidfds) {}
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Watches `who` as rank `rank`, where it is in this process's pid
  // namespace and its pid still names it; returns whether it does.
  bool add(int rank, const ProcessIdentity& who);
  // The first watched rank whose process ended (its pid in *pid), or -1;
  // `which` set: the first of those for which it holds. Never blocks; any
  // thread.
  int firstEnded(int32_t* pid, const std::function<bool(int rank)>& which = {}) const;
  size_t size() const { return watched_.size(); }
  // How many are watched through a pidfd (the rest through /proc).
  size_t byPidfd() const;

 private:
  struct Watched {
    int rank;
    ProcessIdentity id;
    int pidfd;  // -1: through /proc
  };
  bool ended(const Watched& w) const;
  bool pidfds_;
  std::vector<Watched> watched_;
};

}  // namespace hetccl
