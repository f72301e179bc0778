// hetcclCommAbort and hetcclCommDestroy racing calls on other threads, as
// PyTorch's watchdog aborts a hung communicator while the main thread makes
// its next call: every call returns (success, or an error once the
// communicator is gone), nothing crashes, nothing is used after it is freed.
// Part of hetccl_tsan_ranks: run under ThreadSanitizer (make tsan-core) and
// AddressSanitizer (make asan, label "unit"); HETCCL_RACE_TRIALS sets the
// number of trials (default 1000 per test).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hetccl/hetccl.h"

namespace {

int trials(int dflt) {
  const char* v = getenv("HETCCL_RACE_TRIALS");
  return v ? atoi(v) : dflt;
}

hetcclComm_t oneRankComm() {
  hetcclUniqueId id;
  EXPECT_EQ(hetcclGetUniqueId(&id), hetcclSuccess);
  hetcclComm_t c = nullptr;
  EXPECT_EQ(hetcclCommInitRank(&c, 1, id, 0), hetcclSuccess) << hetcclGetLastError(nullptr);
  return c;
}

// What a call may return once another thread aborted or destroyed its
// communicator: success (it ran first) or an error, never a crash.
bool acceptable(hetcclResult_t r) { return r == hetcclSuccess || r == hetcclInvalidUsage || r == hetcclRemoteError; }

enum class Ender { kAbort, kDestroy };

void raceOneRank(Ender how) {
  std::mt19937 rng(12345);
  const int n = trials(1000);
  int ended = 0;
  for (int t = 0; t < n; ++t) {
    hetcclComm_t c = oneRankComm();
    ASSERT_NE(c, nullptr);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::thread worker([&] {
      std::vector<float> buf(256, 1.0f);
      hetcclResult_t e;
      while (!stop.load()) {
        hetcclResult_t r = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, c, nullptr);
        if (!acceptable(r)) bad.fetch_add(1);
        r = hetcclCommGetAsyncError(c, &e);  // the watchdog's poll
        if (!acceptable(r)) bad.fetch_add(1);
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    if (how == Ender::kAbort) {
      EXPECT_EQ(hetcclCommAbort(c), hetcclSuccess) << hetcclGetLastError(nullptr);
    } else {
      // Destroy refuses a communicator another thread is inside; retried
      // until it finds it idle.
      hetcclResult_t r;
      while ((r = hetcclCommDestroy(c)) == hetcclInvalidUsage) std::this_thread::yield();
      EXPECT_EQ(r, hetcclSuccess) << hetcclGetLastError(nullptr);
    }
    ++ended;
    // The handle is gone: later calls are refused, not run on freed memory.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    stop.store(true);
    worker.join();
    EXPECT_EQ(bad.load(), 0) << "trial " << t;
  }
  EXPECT_EQ(ended, n);
}

TEST(AbortRace, AbortWhileAnotherThreadLoopsAllReduce) { raceOneRank(Ender::kAbort); }
TEST(AbortRace, DestroyWhileAnotherThreadLoopsAllReduce) { raceOneRank(Ender::kDestroy); }

// Two ranks (threads) in two groups over shm: rank 0's watchdog aborts after
// 20-40 ms while both loop AllReduce; rank 1 then fails (its peer left) or
// is aborted by its own watchdog. Every call returns.
TEST(AbortRace, AbortOfOneRankWhileBothLoop) {
  std::mt19937 rng(777);
  const int n = std::max(1, trials(1000) / 25);
  for (int t = 0; t < n; ++t) {
    hetcclUniqueId id;
    ASSERT_EQ(hetcclGetUniqueId(&id), hetcclSuccess);
    hetcclComm_t comms[2] = {nullptr, nullptr};
    std::atomic<int> bad{0}, ready{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
        cfg.groupName = r == 0 ? "a" : "b";
        cfg.transport = "shm";
        cfg.timeoutSeconds = 20;
        if (hetcclCommInitRankConfig(&comms[r], 2, id, r, &cfg) != hetcclSuccess) return void(bad.fetch_add(100));
        ready.fetch_add(1);
        std::vector<float> buf(4096, 1.0f);
        while (!stop.load()) {
          hetcclResult_t res =
              hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, comms[r], nullptr);
          if (!acceptable(res)) bad.fetch_add(1);
          if (res != hetcclSuccess) break;  // the communicator failed or is gone
        }
      });
    while (ready.load() < 2 && bad.load() == 0) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 20));
    EXPECT_EQ(hetcclCommAbort(comms[0]), hetcclSuccess) << hetcclGetLastError(nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(hetcclCommAbort(comms[1]), hetcclSuccess) << hetcclGetLastError(nullptr);
    stop.store(true);
    for (auto& th : ranks) th.join();
    EXPECT_EQ(bad.load(), 0) << "trial " << t;
  }
}

}  // namespace
