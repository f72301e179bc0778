// hetcclCommShrink (the drop-in's ncclCommShrink, torch's shrink_group): a
// rank is killed while all loop AllReduce; the survivors fail, shrink the
// communicator without it (HETCCL_SHRINK_ABORT) and go on: the new
// communicator has the survivors only, renumbered in order, and computes
// right. The dead rank takes no part. Also without a fault: a rank that
// leaves is excluded by the others (HETCCL_SHRINK_DEFAULT).
#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

#include "fault_job.h"

namespace hfault {
namespace {

constexpr int kVictim = 3;

// Loops AllReduce until it fails (or `untilIter` iterations when >= 0),
// then shrinks without the victim and checks an AllReduce on the result.
int body(RankCtx& ctx, int flags, int untilIter) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  std::vector<float> buf(1 << 18);
  for (int it = 0; untilIter < 0 || it < untilIter; ++it) {
    std::fill(buf.begin(), buf.end(), 1.0f);
    r = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, comm, nullptr);
    ctx.report("iter", it);
    if (r != hetcclSuccess) {
      ctx.reportCall("loop", r, comm);
      break;
    }
  }
  if (ctx.rank == kVictim) {  // leaves (in the fault case it is killed before)
    hetcclCommDestroy(comm);
    return 0;
  }
  double t0 = now();
  ctx.report("shrink.t0", t0);
  hetcclComm_t shrunk = nullptr;
  int gone = kVictim;
  r = hetcclCommShrink(comm, &gone, 1, &shrunk, nullptr, flags);
  ctx.reportCall("shrink", r, comm);
  if (r != hetcclSuccess) return 3;
  int n = 0, me = -1;
  hetcclCommCount(shrunk, &n);
  hetcclCommUserRank(shrunk, &me);
  ctx.report("shrunk.n", n);
  ctx.report("shrunk.rank", me);
  std::vector<float> x(1000, static_cast<float>(ctx.rank + 1));
  r = hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, shrunk, nullptr);
  ctx.reportCall("after", r, shrunk);
  ctx.report("after.value", static_cast<double>(x[999]));
  ctx.reportCall("destroy.shrunk", hetcclCommDestroy(shrunk), nullptr);
  ctx.reportCall("destroy.old", hetcclCommDestroy(comm), nullptr);
  return 0;
}

void check(Job& job, double t0Limit) {
  for (int r = 0; r < job.nranks(); ++r) {
    if (r == kVictim) continue;
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(job.get(r, "shrink.code"), "0") << job.get(r, "shrink.err") << "\n" << job.describe();
    EXPECT_EQ(job.get(r, "shrunk.n"), "3");
    EXPECT_EQ(job.get(r, "shrunk.rank"), std::to_string(r)) << "survivors keep their order";
    EXPECT_EQ(job.get(r, "after.code"), "0") << job.get(r, "after.err");
    EXPECT_EQ(job.getD(r, "after.value"), 1.0 + 2.0 + 3.0);
    EXPECT_EQ(job.get(r, "destroy.shrunk.code"), "0");
    EXPECT_LE(job.getD(r, "shrink.t") - job.getD(r, "shrink.t0"), t0Limit) << "the shrink took too long";
  }
}

class Shrink : public ::testing::TestWithParam<const char*> {};

TEST_P(Shrink, SurvivorsOfAKilledRankShrinkAndGoOn) {
  JobSpec spec;
  spec.layout = "a,a,b,b";
  spec.transport = GetParam();
  Job job(spec, [](RankCtx& ctx) { return body(ctx, HETCCL_SHRINK_ABORT, -1); });
  ASSERT_TRUE(job.started()) << job.startError();
  ASSERT_TRUE(job.waitUntil([&] { return job.has(kVictim, "iter") && std::stoi(job.get(kVictim, "iter")) >= 3; }, 30))
      << job.describe();
  job.signal(kVictim, SIGKILL);
  EXPECT_TRUE(job.finish(spec.timeoutS + 20)) << job.describe();
  check(job, spec.timeoutS + 2);
}

TEST_P(Shrink, ARankThatLeavesIsExcluded) {
  JobSpec spec;
  spec.layout = "a,a,b,b";
  spec.transport = GetParam();
  Job job(spec, [](RankCtx& ctx) { return body(ctx, HETCCL_SHRINK_DEFAULT, 3); });
  ASSERT_TRUE(job.started()) << job.startError();
  EXPECT_TRUE(job.finish(30)) << job.describe();
  check(job, 5);
}

INSTANTIATE_TEST_SUITE_P(Fault, Shrink, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace hfault
