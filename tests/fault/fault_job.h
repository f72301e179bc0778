// A job of forked ranks that the test (the parent) can hurt while it runs:
// kill or stop a rank, watch what each rank reports and when, and collect
// how every rank ended (exit code or signal).
//
// Unlike tests/mp/harness.h, a rank's body asserts nothing itself: it
// reports facts (result codes, error texts, CLOCK_MONOTONIC times, counts)
// as key/value lines over a pipe, and the parent makes every assertion, so
// times can be compared with the moment a fault was injected. steady_clock
// is CLOCK_MONOTONIC on Linux: one clock for all processes of the machine.
//
// Each rank runs with HETCCL_TIMEOUT_S=<JobSpec::timeoutS> (5 by default),
// PR_SET_PDEATHSIG=SIGKILL, and without the sockets it inherited from the
// parent (the parent may host the rendezvous root).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "forked_ranks.h"
#include "hetccl/hetccl.h"
#include "layout.h"

namespace hfault {

// Seconds on CLOCK_MONOTONIC.
double now();

using hetccl_test::parseLayout;  // "a,a,b,b" -> the group name of each rank

struct JobSpec {
  std::string layout = "a,a,b,b";  // group name of each rank
  std::string transport = "shm";
  int timeoutS = 5;                                      // HETCCL_TIMEOUT_S of every rank and of the parent's root
  bool makeId = true;                                    // the parent calls hetcclGetUniqueId before forking
  std::vector<std::pair<std::string, std::string>> env;  // set in every rank
  std::string stderrDir;                                 // non-empty: rank r's stderr goes to <dir>/rank<r>.log
};

// What a rank's body gets (in the child process).
class RankCtx {
 public:
  int rank = 0;
  int nranks = 0;
  std::string group;
  std::string transport;
  hetcclUniqueId id{};
  int timeoutS = 5;

  void report(const std::string& key, const std::string& value) const;
  void report(const std::string& key, double value) const;
  void report(const std::string& key, long long value) const;
  void report(const std::string& key, int value) const { report(key, static_cast<long long>(value)); }
  // "<key>.code", "<key>.err" (hetcclGetLastError), "<key>.t" (now()).
  void reportCall(const std::string& key, hetcclResult_t r, hetcclComm_t comm) const;
  // hetcclCommInitRankConfig with this rank's group and the job's transport.
  hetcclResult_t init(hetcclComm_t* comm, int blocking = 1) const;
};

struct RankEnd {
  pid_t pid = -1;
  bool ended = false;                          // exited or killed by a signal
  bool hung = false;                           // still running at the deadline (then killed)
  int exitCode = -1;                           // when it exited
  int signal = 0;                              // when a signal ended it
  std::map<std::string, std::string> reports;  // last value per key
  std::vector<std::string> log;                // every report, in order
  std::string describe() const;
};

class Job {
 public:
  using Body = std::function<int(RankCtx&)>;  // the rank's exit code
  Job(const JobSpec& spec, Body body);
  ~Job();  // kills ranks still running

  int nranks() const { return static_cast<int>(ranks_.size()); }
  pid_t pid(int r) const { return ranks_[r].pid; }
  const hetcclUniqueId& id() const { return id_; }
  bool started() const { return started_; }
  const std::string& startError() const { return startError_; }

  // Reads reports and reaps ranks until pred() holds or timeoutS passes.
  bool waitUntil(const std::function<bool()>& pred, double timeoutS);
  bool has(int r, const std::string& key) const { return ranks_[r].reports.count(key) > 0; }
  std::string get(int r, const std::string& key) const;
  double getD(int r, const std::string& key) const;  // NaN when absent
  const RankEnd& end(int r) const { return ranks_[r]; }

  void signal(int r, int sig);
  // Waits until every rank has ended; ranks still running after timeoutS
  // are killed and marked hung. True when none hung.
  bool finish(double timeoutS);
  std::string describe() const;  // every rank's end and reports, for failure messages

 private:
  void pump(int waitMs);

  JobSpec spec_;
  hetcclUniqueId id_{};
  bool started_ = false;
  std::string startError_;
  std::vector<RankEnd> ranks_;
  hetccl_tools::ForkedRanks procs_;
};

// A port pair (p, p+1) that is free now: torchrun's MASTER_PORT and hetccl's
// root port (MASTER_PORT+1). 0 if none was found.
int freePortPair();

// Every "rank <n>" in text, in order of appearance.
std::vector<int> ranksNamed(const std::string& text);

}  // namespace hfault
