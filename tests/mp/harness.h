// Runs a test body on N ranks, each a forked process with its own hetccl
// communicator, and turns what goes wrong in any rank into a gtest failure
// of the calling test.
//
// The parent gets the unique id, forks one child per rank and waits for all
// of them with a deadline (then kills them: a hang is a failure, not a stuck
// CI job). A child creates its communicator with hetcclCommInitRankConfig
// (group name from the layout, transport from the options), runs the body,
// and reports back over a pipe: every gtest failure inside the child (plain
// EXPECT_*/ASSERT_* work there), the step it is on (printed if the job
// hangs), and values that must agree across ranks (result hashes).
// Children run with HETCCL_TIMEOUT_S=30 (unless JobOptions::env says
// otherwise), so a lost peer becomes an error well before the parent's
// deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hetccl/hetccl.h"
#include "layout.h"

namespace hmp {

using hetccl_test::parseLayout;  // "a,a,b,b" -> the group name of each rank
// "a,a,b,b" -> "aabb": a layout as a gtest parameter name.
std::string layoutTag(const std::string& layout);

struct JobOptions {
  std::string transport = "shm";                         // config.transport of every rank
  int deadlineS = 120;                                   // the parent kills the ranks after this many seconds
  bool initComm = true;                                  // false: no unique id, no communicator; the body makes its own
  std::vector<std::pair<std::string, std::string>> env;  // set in every rank before init (after the defaults)
  std::function<void(int rank)> beforeInit;  // runs in each rank just before init (e.g. one rank's own setting)
  bool initMayFail = false;  // a failed init is recorded in Rank::initResult/initError, and the body runs
  // Device kind of each rank ("host", "emu", ...; empty: all host). A GPU
  // rank takes device (rank mod the devices visible) and gets a stream.
  std::vector<std::string> devices;
  // A rank the test kills with SIGKILL (its own body, kill -9 of itself):
  // its death by that signal is no failure of the job.
  int killedRank = -1;
};

// What a rank's body gets.
struct Rank {
  int rank = 0;
  int nranks = 0;
  // Destroyed by the harness after the body unless null: null when
  // JobOptions::initComm is false; a body that aborts it sets it to null.
  hetcclComm_t comm = nullptr;
  hetcclResult_t initResult = hetcclSuccess;  // with JobOptions::initMayFail
  std::string initError;
  std::string group;                // this rank's group name
  std::vector<std::string> layout;  // group name of every rank
  std::string transport;
  std::string device = "host";      // this rank's device kind
  hetcclStream_t stream = nullptr;  // GPU ranks: the stream the body passes (made and destroyed by the harness)
  // Prefix of this rank's reportSame labels: ranks of different
  // communicators (e.g. after a split) must not compare their values.
  std::string scope;

  // Records what the rank is doing; if the job hangs, the parent shows each
  // rank's last step.
  void progress(const std::string& what) const;
  // Every report of `label`, by any rank and any number of times, must carry
  // the same value; the parent compares them after the job (e.g. hashes of
  // AllReduce results: equal across ranks, and run after run).
  void reportSame(const std::string& label, uint64_t value) const;
  // The distinct group names in hetccl's group order: by first appearance
  // in rank order.
  std::vector<std::string> groupNames() const;
};

// "emu,emu,host,host" -> one kind per rank.
std::vector<std::string> parseDevices(const std::string& devices);

// A buffer in the rank's device memory (host ranks: plain memory), filled
// and read back through synchronous copies; freed at scope end.
class DeviceBuffer {
 public:
  DeviceBuffer(const Rank& r, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  std::vector<uint8_t> bytes() const;  // the whole buffer, read back

 private:
  std::string kind_;
  size_t bytes_;
  void* p_ = nullptr;
};

// Waits until the rank's stream has run everything enqueued (host ranks:
// nothing to wait for).
void syncStream(const Rank& r);

// The device kind of GPU-rank tests whose groups hold one GPU each (two
// ranks, layout a,b): emu, or HETCCL_TEST_GPU (e.g. cuda), so that they run
// as they are on a machine with a real GPU (scripts/gpu-check.sh, step
// faults: two processes on one GPU).
std::string testGpuKind();

// Runs body on every rank of `layout` (one process per rank).
void runJob(const std::string& layout, const JobOptions& opt, const std::function<void(Rank&)>& body);

// Thrown by HC_ASSERT_OK after recording the failure: ends the rank's body.
struct AbortRank {};

// Text of a failed call: code name, hetcclGetErrorString, hetcclGetLastError.
std::string callFailure(const char* call, hetcclResult_t r, hetcclComm_t comm);

uint64_t hashBytes(const void* p, size_t n);

// Seconds on the steady clock since t.
// A port P such that P and P+1 are free now (MASTER_PORT for a launcher
// job: hetccl's root listens on MASTER_PORT+1); 0 if none was found.
uint16_t freePortPair();

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// EXPECTs that a call returned `want` and that hetcclGetLastError(comm)
// mentions `word` (the argument or the cause).
void expectError(hetcclResult_t got, hetcclResult_t want, hetcclComm_t comm, const std::string& word, const char* call);

}  // namespace hmp

// Checks a hetccl call returned hetcclSuccess; on failure records it (with
// the last error text) and, for ASSERT, ends the rank: later calls would only
// fail for the same reason or hang.
#define HC_EXPECT_OK(call, comm)                                                         \
  do {                                                                                   \
    hetcclResult_t hc_r_ = (call);                                                       \
    if (hc_r_ != hetcclSuccess) ADD_FAILURE() << ::hmp::callFailure(#call, hc_r_, comm); \
  } while (0)
#define HC_ASSERT_OK(call, comm)                               \
  do {                                                         \
    hetcclResult_t hc_r_ = (call);                             \
    if (hc_r_ != hetcclSuccess) {                              \
      ADD_FAILURE() << ::hmp::callFailure(#call, hc_r_, comm); \
      throw ::hmp::AbortRank{};                                \
    }                                                          \
  } while (0)
// Checks a call failed with `want` and its last error names `word`.
#define EXPECT_HC_ERROR(call, want, comm, word) ::hmp::expectError((call), (want), (comm), (word), #call)
