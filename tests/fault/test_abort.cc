// Fault 4: hetcclCommAbort from a second thread while the main thread is
// blocked in a call that cannot complete (its peers never make the matching
// call). The blocked call must return an error within 1 s of the abort, the
// abort itself must return within 1 s, and neither may return before the
// abort was called (the peers stay idle for far less than HETCCL_TIMEOUT_S).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "fault_job.h"

namespace hfault {
namespace {

enum class Blocked { kAllReduce, kBroadcastRecv, kSendLarge, kNonBlockingInit };

struct AbortCase {
  const char* name;
  const char* layout;
  const char* transport;
  Blocked what;
  int blockedRank;
};

void PrintTo(const AbortCase& c, std::ostream* os) { *os << c.name; }

constexpr double kAbortDelayS = 0.5;  // the aborter waits this long: the call is blocked by then
constexpr double kIdleS = 3.0;        // the other ranks' idle time (< HETCCL_TIMEOUT_S = 5)

// The blocked rank: start the aborter, make the call, report the times.
int blockedRank(RankCtx& ctx, hetcclComm_t comm, Blocked what) {
  std::vector<float> buf(size_t{16} << 20, 1.0f);  // 64 MiB: more than any socket buffer or shm ring
  double tAbort = 0, tAbortDone = 0;
  hetcclResult_t abortCode = hetcclInternalError;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(kAbortDelayS));
    tAbort = now();
    abortCode = hetcclCommAbort(comm);
    tAbortDone = now();
  });
  hetcclResult_t r = hetcclInternalError;
  double t0 = now();
  switch (what) {
    case Blocked::kAllReduce:
      r = hetcclAllReduce(buf.data(), buf.data(), size_t{1} << 20, hetcclFloat32, hetcclSum, comm, nullptr);
      break;
    case Blocked::kBroadcastRecv:
      r = hetcclBroadcast(buf.data(), buf.data(), size_t{1} << 20, hetcclFloat32, 0, comm, nullptr);
      break;
    case Blocked::kSendLarge:
      r = hetcclSend(buf.data(), buf.size(), hetcclFloat32, (ctx.rank + 1) % ctx.nranks, comm, nullptr);
      break;
    case Blocked::kNonBlockingInit: break;
  }
  double t1 = now();
  // The communicator is freed by the abort: the text is this thread's.
  std::string err = hetcclGetLastError(nullptr);
  aborter.join();
  ctx.report("call.code", static_cast<long long>(r));
  ctx.report("call.err", err);
  ctx.report("call.t0", t0);
  ctx.report("call.t1", t1);
  ctx.report("abort.code", static_cast<long long>(abortCode));
  ctx.report("abort.t0", tAbort);
  ctx.report("abort.t1", tAbortDone);
  return 0;
}

int body(RankCtx& ctx, const AbortCase& ac) {
  if (ac.what == Blocked::kNonBlockingInit) {
    // Rank 3 never joins; the others start a non-blocking init, which stays
    // in progress on the proxy thread until the abort ends it.
    if (ctx.rank == 3) {
      std::this_thread::sleep_for(std::chrono::duration<double>(kIdleS));
      return 0;
    }
    hetcclComm_t comm = nullptr;
    hetcclResult_t r = ctx.init(&comm, /*blocking=*/0);
    ctx.report("init.code", static_cast<long long>(r));
    if (r != hetcclInProgress || !comm) return 2;
    std::this_thread::sleep_for(std::chrono::duration<double>(kAbortDelayS));
    hetcclResult_t st = hetcclSuccess;
    hetcclCommGetAsyncError(comm, &st);
    ctx.report("init.state", static_cast<long long>(st));  // still in progress
    double t0 = now();
    r = hetcclCommAbort(comm);
    double t1 = now();
    ctx.report("abort.code", static_cast<long long>(r));
    ctx.report("abort.t0", t0);
    ctx.report("abort.t1", t1);
    return 0;
  }
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  int32_t one = 1;  // every rank is past init after this
  r = hetcclAllReduce(&one, &one, 1, hetcclInt32, hetcclSum, comm, nullptr);
  ctx.reportCall("warmup", r, comm);
  if (r != hetcclSuccess || one != ctx.nranks) return 3;
  if (ctx.rank == ac.blockedRank) return blockedRank(ctx, comm, ac.what);
  std::this_thread::sleep_for(std::chrono::duration<double>(kIdleS));  // never makes the matching call
  r = hetcclCommDestroy(comm);
  ctx.reportCall("destroy", r, nullptr);
  return 0;
}

class AbortWhileBlocked : public ::testing::TestWithParam<AbortCase> {};

TEST_P(AbortWhileBlocked, ReleasesTheCallWithinOneSecond) {
  const AbortCase ac = GetParam();
  JobSpec spec;
  spec.layout = ac.layout;
  spec.transport = ac.transport;
  spec.timeoutS = 5;
  Job job(spec, [&ac](RankCtx& ctx) { return body(ctx, ac); });
  ASSERT_TRUE(job.started()) << job.startError();
  EXPECT_TRUE(job.finish(30)) << job.describe();
  for (int r = 0; r < job.nranks(); ++r) {
    const RankEnd& e = job.end(r);
    EXPECT_TRUE(e.ended && !e.hung && e.signal == 0 && e.exitCode == 0) << "rank " << r << "\n" << job.describe();
  }

  std::vector<int> blocked;
  if (ac.what == Blocked::kNonBlockingInit)
    blocked = {0, 1, 2};
  else
    blocked = {ac.blockedRank};
  for (int r : blocked) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const double tA = job.getD(r, "abort.t0"), abortS = job.getD(r, "abort.t1") - tA;
    EXPECT_EQ(job.get(r, "abort.code"), "0") << job.describe();
    EXPECT_LE(abortS, 1.0) << "hetcclCommAbort took " << abortS << " s";
    if (ac.what == Blocked::kNonBlockingInit) {
      EXPECT_EQ(job.get(r, "init.code"), std::to_string(hetcclInProgress)) << job.describe();
      EXPECT_EQ(job.get(r, "init.state"), std::to_string(hetcclInProgress))
          << "init should still be waiting for rank 3 when it is aborted\n"
          << job.describe();
      printf("[fault] %s: rank %d: abort of an init in progress took %.3f s\n", ac.name, r, abortS);
      continue;
    }
    const int code = atoi(job.get(r, "call.code").c_str());
    const double released = job.getD(r, "call.t1") - tA;
    printf("[fault] %s: rank %d: call returned %d %.3f s after the abort began; abort took %.3f s: %s\n", ac.name, r,
           code, released, abortS, job.get(r, "call.err").c_str());
    EXPECT_NE(code, hetcclSuccess) << "an aborted call must fail\n" << job.describe();
    EXPECT_NE(code, hetcclInProgress) << job.describe();
    EXPECT_GE(released, 0) << "the call returned before the abort, so nothing was tested: " << job.get(r, "call.err");
    EXPECT_LE(released, 1.0) << "the blocked call was not released within 1 s of the abort";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fault, AbortWhileBlocked,
    ::testing::Values(AbortCase{"AllReduce_aabb_shm", "a,a,b,b", "shm", Blocked::kAllReduce, 0},
                      AbortCase{"AllReduce_aabb_tcp", "a,a,b,b", "tcp", Blocked::kAllReduce, 0},
                      AbortCase{"AllReduce_aaaa_shm", "a,a,a,a", "shm", Blocked::kAllReduce, 2},
                      AbortCase{"BroadcastReceiver_aabb_tcp", "a,a,b,b", "tcp", Blocked::kBroadcastRecv, 3},
                      AbortCase{"SendLarge_ab_shm", "a,b", "shm", Blocked::kSendLarge, 0},
                      AbortCase{"SendLarge_ab_tcp", "a,b", "tcp", Blocked::kSendLarge, 1},
                      AbortCase{"NonBlockingInit_aabb_shm", "a,a,b,b", "shm", Blocked::kNonBlockingInit, -1}),
    [](const ::testing::TestParamInfo<AbortCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hfault
