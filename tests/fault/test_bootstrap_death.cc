// Fault 2: one rank dies or stops during bootstrap; the others' init must
// return an error within HETCCL_TIMEOUT_S + 5 s, and they must exit cleanly.
//
// The fault is placed exactly (connect_hook.h): a victim rank kills
// (SIGKILL) or stops (SIGSTOP) itself right after its N-th successful TCP
// connect: 1st = the rendezvous root, 2nd = its bootstrap ring successor,
// 3rd.. = TCP transport peers (lower ranks first).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "connect_hook.h"
#include "fault_job.h"

namespace hfault {
namespace {

enum class Fault { kStopBeforeJoin, kAfterConnect };

struct BootCase {
  const char* name;
  const char* transport;
  int victim;
  Fault fault;
  int nthConnect;  // kAfterConnect: which connect
  int signal;      // SIGKILL or SIGSTOP
  bool fromEnv;    // hetcclCommInitFromEnv (torchrun variables; rank 0 hosts the root)
};

void PrintTo(const BootCase& c, std::ostream* os) { *os << c.name; }

class BootstrapDeath : public ::testing::TestWithParam<BootCase> {};

TEST_P(BootstrapDeath, OthersInitFails) {
  const BootCase bc = GetParam();
  JobSpec spec;
  spec.layout = "a,a,b,b";
  spec.transport = bc.transport;
  spec.timeoutS = 5;
  spec.makeId = !bc.fromEnv;
  if (bc.fromEnv) {
    int port = freePortPair();
    ASSERT_NE(port, 0);
    spec.env = {{"WORLD_SIZE", "4"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)},
                {"HETCCL_GROUP_MAP", "0-1:a,2-3:b"},
                {"HETCCL_TRANSPORT", bc.transport}};
  }
  Job job(spec, [&bc](RankCtx& ctx) {
    if (ctx.rank == bc.victim) {
      auto fault = [&ctx, sig = bc.signal] {
        ctx.report("fault.t", now());
        raise(sig);
      };
      if (bc.fault == Fault::kStopBeforeJoin)
        fault();
      else
        armAfterConnect(bc.nthConnect, fault);
    }
    hetcclComm_t comm = nullptr;
    ctx.report("init.t0", now());
    hetcclResult_t r;
    if (bc.fromEnv) {
      setenv("RANK", std::to_string(ctx.rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(ctx.rank).c_str(), 1);
      r = hetcclCommInitFromEnv(&comm, nullptr);
    } else {
      r = ctx.init(&comm);
    }
    ctx.reportCall("init", r, nullptr);
    if (r == hetcclSuccess) hetcclCommAbort(comm);
    return 0;
  });
  ASSERT_TRUE(job.started()) << job.startError();
  const int n = job.nranks();
  const double limitS = spec.timeoutS + 5;

  // The survivors end by themselves; the victim is dead or stopped.
  bool survivorsDone = job.waitUntil(
      [&] {
        for (int r = 0; r < n; ++r)
          if (r != bc.victim && !job.end(r).ended) return false;
        return true;
      },
      limitS + 15);
  const bool victimFaulted = job.has(bc.victim, "fault.t");
  const bool victimStopped = !job.end(bc.victim).ended;
  job.signal(bc.victim, SIGKILL);  // a stopped victim is killed now
  bool noHang = job.finish(5);
  EXPECT_TRUE(survivorsDone && noHang) << "survivors still in init " << limitS + 15 << " s later\n" << job.describe();
  ASSERT_TRUE(victimFaulted) << "the fault was never injected (fewer connects than expected?)\n" << job.describe();
  if (bc.signal == SIGSTOP) {
    EXPECT_TRUE(victimStopped) << "the victim should have been stopped\n" << job.describe();
  } else {
    EXPECT_EQ(job.end(bc.victim).signal, SIGKILL) << job.describe();
  }
  EXPECT_FALSE(job.has(bc.victim, "init.code")) << "the victim's init should never have returned\n" << job.describe();

  const double tFault = job.getD(bc.victim, "fault.t");
  printf("[fault] %s: rank %d %s\n", bc.name, bc.victim, bc.signal == SIGSTOP ? "stopped" : "killed");
  for (int r = 0; r < n; ++r) {
    if (r == bc.victim) continue;
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankEnd& e = job.end(r);
    EXPECT_TRUE(e.ended && !e.hung && e.signal == 0 && e.exitCode == 0) << job.describe();
    ASSERT_TRUE(job.has(r, "init.code")) << job.describe();
    const int code = atoi(job.get(r, "init.code").c_str());
    const std::string err = job.get(r, "init.err");
    const double took = job.getD(r, "init.t") - job.getD(r, "init.t0");
    const double afterFault = job.getD(r, "init.t") - tFault;
    printf("[fault]   rank %d: init returned %d after %.3f s (%.3f s after the fault): %s\n", r, code, took, afterFault,
           err.c_str());
    EXPECT_TRUE(code == hetcclRemoteError || code == hetcclSystemError) << "code " << code << ": " << err;
    EXPECT_LE(took, limitS) << err;
    EXPECT_LE(afterFault, limitS) << err;
    EXPECT_NE(err.find("hetcclCommInit"), std::string::npos) << "the error must name the call: " << err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fault, BootstrapDeath,
    ::testing::Values(BootCase{"StoppedBeforeJoin", "shm", 3, Fault::kStopBeforeJoin, 0, SIGSTOP, false},
                      BootCase{"KilledAfterRootConnect", "shm", 3, Fault::kAfterConnect, 1, SIGKILL, false},
                      BootCase{"StoppedAfterRingConnect", "shm", 3, Fault::kAfterConnect, 2, SIGSTOP, false},
                      BootCase{"KilledAfterRingConnect", "tcp", 2, Fault::kAfterConnect, 2, SIGKILL, false},
                      BootCase{"KilledAfterTransportConnect", "tcp", 3, Fault::kAfterConnect, 3, SIGKILL, false},
                      BootCase{"StoppedAfterTransportConnect", "tcp", 3, Fault::kAfterConnect, 4, SIGSTOP, false},
                      BootCase{"RootHostKilledFromEnv", "tcp", 0, Fault::kAfterConnect, 1, SIGKILL, true}),
    [](const ::testing::TestParamInfo<BootCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hfault
