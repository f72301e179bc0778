// Ranks as forked processes, each with a pipe of text lines to the parent:
// the one way hetccl-perf's --np (tools/perf/launch.cc), the multi-process
// suite (tests/mp/harness.h), the fault suite (tests/fault/fault_job.h) and
// the soak test start, watch, reap and kill their ranks. What the lines say,
// and what the parent makes of them, is theirs.
//
// The job's unique id may be made after the fork and sent down a pipe of
// its own (sendId): hetcclGetUniqueId starts the rendezvous thread, and a
// fork while another thread holds a lock (ASan's allocator, say) can hang
// the child.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "hetccl/hetccl.h"

namespace hetccl_tools {

class ForkedRanks {
 public:
  // Runs in rank `rank`'s process; reportFd is its end of the line pipe,
  // idFd (-1 unless start's idAfterFork) where readId finds the id. Must
  // not return (end with _exit).
  using Child = std::function<void(int rank, int reportFd, int idFd)>;

  ForkedRanks() = default;
  ~ForkedRanks();  // kills and reaps the ranks still running
  ForkedRanks(const ForkedRanks&) = delete;
  ForkedRanks& operator=(const ForkedRanks&) = delete;

  // Forks n ranks. False, with *error, when a pipe or a fork failed (the
  // ranks forked so far are killed).
  bool start(int n, bool idAfterFork, const Child& child, std::string* error);
  // Sends every rank the id (start with idAfterFork). False if a rank's
  // pipe took less than all of it.
  bool sendId(const hetcclUniqueId& id);

  // Reads what the ranks wrote (waiting up to waitMs for the first bytes),
  // calls onLine(rank, line) for each complete line, and reaps the ranks
  // that ended.
  void pump(int waitMs, const std::function<void(int rank, const std::string& line)>& onLine);
  // Whether any pipe is still open (a rank may still write).
  bool anyOpen() const;

  int size() const { return static_cast<int>(ranks_.size()); }
  pid_t pid(int r) const { return ranks_[r].pid; }
  bool ended(int r) const { return ranks_[r].ended; }
  bool allEnded() const;
  int status(int r) const { return ranks_[r].status; }  // waitpid's, once ended
  void signal(int r, int sig);                          // if still running
  // Kills (SIGKILL) and reaps the ranks still running; returns which.
  std::vector<int> killRemaining();

 private:
  struct Proc {
    pid_t pid = -1;
    int fd = -1;          // the line pipe's read end, -1 once closed
    int idFd = -1;        // the id pipe's write end, -1 once sent
    std::string pending;  // a partial line
    bool ended = false;
    int status = 0;
  };
  std::vector<Proc> ranks_;
};

// In the child: the id the parent sends (sendId). False if the parent went
// away first.
bool readId(int idFd, hetcclUniqueId* id);

}  // namespace hetccl_tools
