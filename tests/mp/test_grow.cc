// hetcclCommGetUniqueId and hetcclCommGrow: two running ranks grow to four
// in two groups (the new ranks bring the second group, or join both), and
// every collective is right on the grown communicator; bad arguments fail on
// every rank, at once, with an error naming them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "grow_util.h"

namespace hmp {
namespace {

class Grow : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Grow, TwoRunningRanksGrowToFourAndEveryCollectiveIsRight) {
  JobOptions opt;
  opt.transport = std::get<1>(GetParam());
  runJob(std::get<0>(GetParam()), opt, [](Rank& r) { growTwoToFour(r); });
}

// a,a,b,b: the new ranks bring the second group (the border appears);
// a,b,a,b: the running pair spans both groups already.
INSTANTIATE_TEST_SUITE_P(Mp, Grow,
                         ::testing::Combine(::testing::Values("a,a,b,b", "a,b,a,b"), ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return layoutTag(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

// Waits until a non-blocking communicator's work is done; its last result.
hetcclResult_t settle(hetcclComm_t comm) {
  hetcclResult_t async = hetcclInProgress;
  const auto t0 = std::chrono::steady_clock::now();
  while (async == hetcclInProgress && secondsSince(t0) < 30) {
    if (hetcclCommGetAsyncError(comm, &async) != hetcclSuccess) return hetcclInternalError;
    if (async == hetcclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return async;
}

// Non-blocking: every rank's grow says hetcclInProgress, and the grown
// communicator computes once hetcclCommGetAsyncError stops saying so.
void growNonBlocking(Rank& r) {
  hetcclComm_t pair = runningPair(r);
  hetcclUniqueId id{};
  if (r.rank == 0) HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);
  id = shareId(r, id);
  hetcclConfig_t cfg = newRankConfig(r);
  if (r.rank < 2) cfg.groupName = nullptr;  // the parent's group
  cfg.blocking = 0;
  hetcclComm_t grown = nullptr;
  r.progress("non-blocking hetcclCommGrow");
  hetcclResult_t res = r.rank < 2 ? hetcclCommGrow(pair, 4, r.rank == 0 ? &id : nullptr, -1, &grown, &cfg)
                                  : hetcclCommGrow(nullptr, 4, &id, r.rank, &grown, &cfg);
  EXPECT_EQ(res, hetcclInProgress) << hetcclGetLastError(pair);
  ASSERT_NE(grown, nullptr);
  ASSERT_EQ(settle(grown), hetcclSuccess) << hetcclGetLastError(grown);
  std::vector<float> x(1000, static_cast<float>(r.rank + 1));
  res = hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, grown, nullptr);
  EXPECT_TRUE(res == hetcclSuccess || res == hetcclInProgress) << hetcclGetLastError(grown);
  ASSERT_EQ(settle(grown), hetcclSuccess) << hetcclGetLastError(grown);
  EXPECT_EQ(x[999], 10.0f);
  HC_EXPECT_OK(hetcclCommDestroy(grown), nullptr);
  if (pair) HC_EXPECT_OK(hetcclCommDestroy(pair), nullptr);
}

TEST(GrowNonBlocking, EveryRankSaysInProgressThenTheGrownCommunicatorComputes) {
  runJob("a,a,b,b", JobOptions{}, growNonBlocking);
}

// A job launched with HETCCL_GROUP_MAP grows: the running ranks keep the
// groups they read from the map, and new ranks started without it (as a
// replacement an elastic agent starts) name theirs with HETCCL_GROUP. Only
// ranks that read their group from a map compare maps.
void growFromMap(Rank& r) {
  hetcclComm_t pair = runningPair(r);
  hetcclUniqueId id{};
  if (r.rank == 0) HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);
  id = shareId(r, id);
  hetcclComm_t grown = nullptr;
  r.progress("hetcclCommGrow");
  if (r.rank < 2) {
    HC_ASSERT_OK(hetcclCommGrow(pair, 4, r.rank == 0 ? &id : nullptr, -1, &grown, nullptr), pair);
  } else {
    unsetenv("HETCCL_GROUP_MAP");
    setenv("HETCCL_GROUP", "b", 1);
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.transport = r.transport.c_str();
    HC_ASSERT_OK(hetcclCommGrow(nullptr, 4, &id, r.rank, &grown, &cfg), nullptr);
  }
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  HC_ASSERT_OK(hetcclCommGetInfo(grown, &info), grown);
  ASSERT_EQ(info.ngroups, 2);
  EXPECT_STREQ(info.groupName[info.myGroup], r.rank < 2 ? "a" : "b");
  std::vector<float> x(1000, static_cast<float>(r.rank + 1));
  HC_EXPECT_OK(hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, grown, nullptr), grown);
  EXPECT_EQ(x[999], 10.0f);
  HC_EXPECT_OK(hetcclCommDestroy(grown), nullptr);
  if (pair) HC_EXPECT_OK(hetcclCommDestroy(pair), nullptr);
}

TEST(GrowFromMap, RunningRanksOfAGroupMapAndNewRanksOfHetcclGroup) {
  JobOptions opt;
  opt.env = {{"HETCCL_GROUP_MAP", "0-1:a,2-3:b"}};
  runJob("-,-,-,-", opt, growFromMap);
}

// Asserts that a grow failed on this rank, naming `word`, well before the
// timeout (a rank that waits it out would mean another rank was not told).
void expectGrowFailed(hetcclResult_t got, double seconds, hetcclComm_t comm, const std::string& word) {
  EXPECT_NE(got, hetcclSuccess) << "the grow must fail on every rank";
  const std::string err = hetcclGetLastError(comm);
  EXPECT_NE(err.find(word), std::string::npos) << "error: " << err;
  EXPECT_LT(seconds, 10.0) << "the failure took the timeout (20 s) to arrive: " << err;
}

hetcclResult_t timedGrow(hetcclComm_t comm, int nranks, const hetcclUniqueId* id, int rank, hetcclComm_t* out,
                         hetcclConfig_t* cfg, double* seconds) {
  auto t0 = std::chrono::steady_clock::now();
  hetcclResult_t res = hetcclCommGrow(comm, nranks, id, rank, out, cfg);
  *seconds = secondsSince(t0);
  return res;
}

void badGrows(Rank& r) {
  hetcclComm_t pair = runningPair(r);
  hetcclComm_t out = reinterpret_cast<hetcclComm_t>(0x1);
  hetcclConfig_t cfg = newRankConfig(r);
  // Arguments each rank checks alone.
  if (r.rank >= 2) {
    EXPECT_HC_ERROR(hetcclCommGrow(nullptr, 4, nullptr, r.rank, &out, &cfg), hetcclInvalidArgument, nullptr,
                    "uniqueId is NULL");
    EXPECT_EQ(out, nullptr);
    hetcclUniqueId plain{};
    HC_ASSERT_OK(hetcclGetUniqueId(&plain), nullptr);
    EXPECT_HC_ERROR(hetcclCommGrow(nullptr, 4, &plain, r.rank, &out, &cfg), hetcclInvalidArgument, nullptr,
                    "not a grow id");
  } else {
    EXPECT_HC_ERROR(hetcclCommGrow(pair, 4, nullptr, -1, nullptr, nullptr), hetcclInvalidArgument, pair, "newcomm");
    EXPECT_HC_ERROR(hetcclCommGetUniqueId(pair, nullptr), hetcclInvalidArgument, pair, "uniqueId");
  }
  hetcclUniqueId id{};
  if (r.rank == 0) {
    HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);
    hetcclUniqueId again{};
    EXPECT_HC_ERROR(hetcclCommGetUniqueId(pair, &again), hetcclInvalidUsage, pair, "one at a time");
  }
  id = shareId(r, id);
  if (r.rank >= 2) {
    hetcclUniqueId noRank = id;
    EXPECT_HC_ERROR(hetcclCommGrow(nullptr, 4, &noRank, -1, &out, &cfg), hetcclInvalidArgument, nullptr, "rank -1");
  }

  // Rank 2 takes rank 1's number: it fails at once, and so does everyone.
  double s = 0;
  r.progress("a grow with a clashing new rank");
  if (r.rank < 2) {
    expectGrowFailed(timedGrow(pair, 4, r.rank == 0 ? &id : nullptr, -1, &out, nullptr, &s), s, pair, "new rank 1");
  } else {
    hetcclResult_t res = timedGrow(nullptr, 4, &id, r.rank == 2 ? 1 : 3, &out, &cfg, &s);
    expectGrowFailed(res, s, nullptr, "new rank 1");
    if (r.rank == 2) {
      EXPECT_EQ(res, hetcclInvalidArgument);
    }
  }
  EXPECT_EQ(out, nullptr);

  // The running ranks disagree on nranks: every rank fails, naming it.
  if (r.rank == 0) HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);  // the first one was taken
  id = shareId(r, id);
  r.progress("a grow whose running ranks disagree on nranks");
  if (r.rank < 2) {
    hetcclResult_t res = timedGrow(pair, r.rank == 0 ? 4 : 5, r.rank == 0 ? &id : nullptr, -1, &out, nullptr, &s);
    expectGrowFailed(res, s, pair, "passed nranks 5");
    EXPECT_EQ(res, hetcclInvalidArgument);
  } else {
    expectGrowFailed(timedGrow(nullptr, 4, &id, r.rank, &out, &cfg, &s), s, nullptr, "passed nranks 5");
  }

  // nranks no larger than the running communicator.
  if (r.rank == 0) HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);
  id = shareId(r, id);
  r.progress("a grow to no more ranks");
  if (r.rank < 2) {
    EXPECT_HC_ERROR(hetcclCommGrow(pair, 2, r.rank == 0 ? &id : nullptr, -1, &out, nullptr), hetcclInvalidArgument,
                    pair, "must be larger");
  } else {
    EXPECT_HC_ERROR(hetcclCommGrow(nullptr, 2, &id, r.rank, &out, &cfg), hetcclInvalidArgument, nullptr,
                    "must be larger");
  }
  if (pair) HC_EXPECT_OK(hetcclCommDestroy(pair), nullptr);
}

TEST(GrowBadInput, EveryRankFailsAtOnceNamingTheArgument) {
  JobOptions opt;
  opt.env = {{"HETCCL_TIMEOUT_S", "20"}};
  runJob("a,a,b,b", opt, badGrows);
}

}  // namespace
}  // namespace hmp
