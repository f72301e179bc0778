// Fault 1: kill -9 one of 4 ranks (groups a,a,b,b) in the middle of a large
// AllReduce (64M floats, looped). The other three must fail that call with a
// remote or system error within HETCCL_TIMEOUT_S + 5 s of the kill, say which
// operation failed and which peer, keep failing afterwards (the error sticks
// to the communicator), end it cleanly (hetcclCommDestroy on shm,
// hetcclCommAbort on tcp) and exit: no crash, no hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "fault_job.h"

namespace hfault {
namespace {

constexpr size_t kCount = size_t{64} << 20;  // 64M floats: 256 MiB per buffer
constexpr int kMaxIters = 1000;              // the kill comes long before

int allReduceLoop(RankCtx& ctx, bool destroy) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  std::vector<float> send(kCount, static_cast<float>(ctx.rank + 1)), recv(kCount);
  const float expect = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2);
  int failedAt = -1;
  for (int it = 0; it < kMaxIters; ++it) {
    recv[0] = recv[kCount / 2] = recv[kCount - 1] = -1.0f;
    ctx.report("start." + std::to_string(it), now());
    ctx.report("iter", it);
    r = hetcclAllReduce(send.data(), recv.data(), kCount, hetcclFloat32, hetcclSum, comm, nullptr);
    if (r != hetcclSuccess) {
      ctx.reportCall("ar", r, comm);
      ctx.report("ar.iter", it);
      failedAt = it;
      break;
    }
    size_t probe = (static_cast<size_t>(it) * 7919u * 1021u + 13u) % kCount;
    for (size_t i : {size_t{0}, kCount / 2, kCount - 1, probe})
      if (recv[i] != expect)
        ctx.report("wrong", "iteration " + std::to_string(it) + " element " + std::to_string(i) + " = " +
                                std::to_string(recv[i]));
    ctx.report("done." + std::to_string(it), now());
  }
  if (failedAt < 0) {
    ctx.report("nofail", 1);
    hetcclCommDestroy(comm);
    return 3;
  }
  hetcclResult_t async = hetcclSuccess;
  hetcclCommGetAsyncError(comm, &async);
  ctx.report("async", static_cast<long long>(async));
  // The communicator is broken: the next call must fail at once, not hang.
  double t0 = now();
  int32_t one = 1;
  r = hetcclAllReduce(&one, &one, 1, hetcclInt32, hetcclSum, comm, nullptr);
  ctx.report("again.code", static_cast<long long>(r));
  ctx.report("again.s", now() - t0);
  t0 = now();
  r = destroy ? hetcclCommDestroy(comm) : hetcclCommAbort(comm);
  ctx.report("end.code", static_cast<long long>(r));
  ctx.report("end.s", now() - t0);
  return 0;
}

struct DeathCase {
  const char* transport;
  int victim;
  bool destroy;             // the survivors end with hetcclCommDestroy, else hetcclCommAbort
  double killAt = 1.0 / 3;  // into the iteration, as a fraction of one AllReduce's time
};

void PrintTo(const DeathCase& c, std::ostream* os) { *os << c.transport << ", kill rank " << c.victim; }

class PeerDeath : public ::testing::TestWithParam<DeathCase> {};

TEST_P(PeerDeath, KillNineMidAllReduce) {
  const DeathCase dc = GetParam();
  JobSpec spec;
  spec.layout = "a,a,b,b";
  spec.transport = dc.transport;
  spec.timeoutS = 5;
  if (spec.transport.rfind("ofi", 0) == 0) spec.env = {{"FI_PROVIDER", "tcp"}, {"FI_TCP_IFACE", "lo"}};  // on lo
  // ofi_rma: the border's plain receives (the gather half of the AllReduce,
  // where the kill lands) are written by RMA. That a write is in flight at
  // the kill is likely, not checked.
  if (spec.transport == "ofi_rma") {
    spec.transport = "ofi";
    spec.env.emplace_back("HETCCL_OFI_RMA_MIN", "64K");
  }
  Job job(spec, [&dc](RankCtx& ctx) { return allReduceLoop(ctx, dc.destroy); });
  ASSERT_TRUE(job.started()) << job.startError();
  const int n = job.nranks();

  // Steady state: every rank finished one 64M AllReduce and is in the next.
  bool running = job.waitUntil(
      [&] {
        for (int r = 0; r < n; ++r)
          if (!job.has(r, "done.0") || !job.has(r, "start.1") || job.end(r).ended) return false;
        return true;
      },
      40);
  ASSERT_TRUE(running) << "the ranks never reached their second AllReduce\n" << job.describe();
  double start1 = 0, iterS = 0;
  for (int r = 0; r < n; ++r) {
    start1 = std::max(start1, job.getD(r, "start.1"));
    iterS = std::max(iterS, job.getD(r, "done.0") - job.getD(r, "start.0"));
  }
  // Kill a part of an iteration (a third unless the case says) after the last rank entered it.
  double killAt = start1 + std::max(0.05, iterS * dc.killAt);
  while (now() < killAt) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  job.waitUntil([] { return true; }, 0);  // read what the victim reported so far
  const std::string victimIter = job.get(dc.victim, "iter");
  const bool victimInCall = !job.has(dc.victim, "done." + victimIter);
  const double tKill = now();
  job.signal(dc.victim, SIGKILL);

  const double limitS = spec.timeoutS + 5;
  bool noHang = job.finish(limitS + 10);
  EXPECT_TRUE(noHang) << "ranks still running " << limitS + 10 << " s after the kill\n" << job.describe();
  EXPECT_TRUE(victimInCall) << "the victim was not inside an AllReduce when it was killed (iteration took " << iterS
                            << " s)\n"
                            << job.describe();
  EXPECT_EQ(job.end(dc.victim).signal, SIGKILL) << job.describe();

  int namedVictim = 0;
  printf("[fault] %s: killed rank %d in AllReduce #%s (one AllReduce of 64M floats took %.2f s)\n", dc.transport,
         dc.victim, victimIter.c_str(), iterS);
  for (int r = 0; r < n; ++r) {
    if (r == dc.victim) continue;
    const RankEnd& e = job.end(r);
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(e.ended && !e.hung && e.signal == 0 && e.exitCode == 0) << "a survivor must exit cleanly\n"
                                                                        << job.describe();
    ASSERT_TRUE(job.has(r, "ar.code")) << "no failed AllReduce reported\n" << job.describe();
    const int code = atoi(job.get(r, "ar.code").c_str());
    const std::string err = job.get(r, "ar.err");
    const double after = job.getD(r, "ar.t") - tKill;
    printf("[fault]   rank %d: AllReduce #%s returned %d (%s) %.3f s after the kill: %s\n", r,
           job.get(r, "ar.iter").c_str(), code, hetcclGetErrorString(static_cast<hetcclResult_t>(code)), after,
           err.c_str());
    EXPECT_TRUE(code == hetcclRemoteError || code == hetcclSystemError) << "code " << code << ": " << err;
    EXPECT_GE(after, 0) << "failed before the kill: " << err;
    EXPECT_LE(after, limitS) << "the error came too late: " << err;
    EXPECT_NE(err.find("hetcclAllReduce"), std::string::npos) << "the error must name the operation: " << err;
    bool peerNamed = false;
    for (int named : ranksNamed(err)) {
      if (named != r) peerNamed = true;
      if (named == dc.victim) ++namedVictim;
    }
    EXPECT_TRUE(peerNamed) << "the error must name a peer rank: " << err;
    EXPECT_FALSE(job.has(r, "wrong")) << "wrong result before the kill: " << job.get(r, "wrong");
    EXPECT_NE(job.get(r, "async"), "0") << "the failure must stick to the communicator";
    EXPECT_NE(job.get(r, "again.code"), "0") << "a call after the failure must fail";
    EXPECT_LT(job.getD(r, "again.s"), 1.0) << "a call after the failure must fail at once";
    EXPECT_EQ(job.get(r, "end.code"), "0") << (dc.destroy ? "hetcclCommDestroy" : "hetcclCommAbort");
    EXPECT_LT(job.getD(r, "end.s"), 2.0) << (dc.destroy ? "hetcclCommDestroy" : "hetcclCommAbort") << " took too long";
  }
  EXPECT_GE(namedVictim, 1) << "no survivor named the killed rank " << dc.victim << "\n" << job.describe();
}

#if HETCCL_HAVE_OFI
#define HETCCL_OFI_DEATH \
  , DeathCase{"ofi", 3, false}, DeathCase { "ofi_rma", 2, false, 2.0 / 3 }
#else
#define HETCCL_OFI_DEATH
#endif
INSTANTIATE_TEST_SUITE_P(Fault, PeerDeath,
                         ::testing::Values(DeathCase{"shm", 2, true}, DeathCase{"tcp", 1, false},
                                           DeathCase{"net", 3, false} HETCCL_OFI_DEATH),
                         [](const ::testing::TestParamInfo<DeathCase>& i) {
                           return std::string(i.param.transport) + "_victim" + std::to_string(i.param.victim);
                         });

}  // namespace
}  // namespace hfault
