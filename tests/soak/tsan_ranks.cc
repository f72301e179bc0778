// Concurrency tests written for ThreadSanitizer (labels "tsan" and "unit",
// so `make tsan` runs them): every rank is a thread of this process, so
// TSan sees every thread that touches a communicator's state.
//
//  * Transports: hetccl::Bootstrap + createTransport("tcp"/"shm") per
//    thread-rank, batches in both directions with every peer at once, data
//    checked; abort set from another thread while a rank waits.
//  * Rendezvous root: startRootServer, then many ranks and hostile clients
//    (wrong secret) at the same time: the root's per-connection threads.
//  * Proxy: non-blocking communicators (hetcclConfig_t.blocking = 0) through
//    the public API, one per thread-rank, over tcp and shm: init, a queue of
//    collectives and a Send/Recv group run on each proxy thread while the
//    rank's thread keeps queueing and another thread polls
//    hetcclCommGetAsyncError; then abort from another thread while a
//    proxy job waits for a peer that never comes.
//
// Limitation: shm ranks in one process map each other's segments at
// different addresses, and single-copy reads go through the kernel, so TSan
// cannot check the ring protocol itself (the soak test and unit tests check
// its results across processes).
//
// KNOWN RACE (reported, not suppressed; the unit tests show it under
// `make tsan`): the rendezvous root thread is detached (root.cc), so
// nothing orders its reads of the static settings table (config.cc kVars,
// read when the root thread is the first to ask logEnabled, log.cc readEnv)
// before the table's destruction at exit. This binary reads the log
// settings on the main thread first (LogFirstOnMain below), so the root
// threads never touch the table and a TSan report here is a new finding.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"
#include "hetccl/hetccl.h"
#include "transport/transport.h"
#include "unit_util.h"

namespace {

using namespace hetccl;
using hetccl::test::expectAllOk;
using hetccl::test::newJob;
using hetccl::test::runRanks;
using Clock = std::chrono::steady_clock;

// See KNOWN RACE above.
class LogFirstOnMain : public ::testing::Environment {
 public:
  void SetUp() override { logEnabled(LogLevel::kWarn, kAll); }
};
const auto* const kLogFirst = ::testing::AddGlobalTestEnvironment(new LogFirstOnMain);

uint8_t pattern(int from, int to, int round, size_t i) {
  return static_cast<uint8_t>(from * 41 + to * 7 + round * 3 + i * 13 + (i >> 11));
}

MsgTag tag(uint64_t seq) {
  MsgTag t;
  t.seq = seq;
  t.coll = static_cast<uint16_t>(CollKind::kSendRecv);
  return t;
}

// ---- transports: ranks as threads, each with its own Bootstrap ----

class TsanTransport : public ::testing::TestWithParam<const char*> {};

TEST_P(TsanTransport, AllPeersBothWaysManyRoundsThenAbort) {
  const int n = 4;
  IdContents id = newJob(60);
  std::vector<std::atomic<bool>> aborts(n);
  // Sizes cross the shm slot (256 KiB: single-copy reads) and wrap the small rings and staging.
  const std::vector<size_t> sizes = {0, 1, 4099, 70000, 300001};
  std::atomic<int> waiting{0};
  std::atomic<bool> abortTested{false};
  expectAllOk(runRanks(n, [&](int r) {
    Bootstrap b(id, r, n, {static_cast<uint8_t>(r)}, 60, &aborts[r]);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    for (int p = 0; p < n; ++p)
      if (p != r) ctx.peers.push_back(p);
    ctx.bootstrap = &b;
    ctx.abort = &aborts[r];
    ctx.timeoutS = 60;
    ctx.buffBytes = 128 << 10;
    std::unique_ptr<Transport> t = createTransport(GetParam(), ctx);
    for (int round = 0; round < 6; ++round) {
      const size_t size = sizes[round % sizes.size()];
      std::vector<std::vector<uint8_t>> out, in;
      std::vector<std::vector<float>> acc;
      std::vector<float> mine(size / 4 + 1, static_cast<float>(r + 1));
      out.reserve(n), in.reserve(n), acc.reserve(n);
      std::vector<std::vector<Xfer>> perPeer;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        out.emplace_back(size);
        for (size_t i = 0; i < size; ++i) out.back()[i] = pattern(r, p, round, i);
        in.emplace_back(size, 0);
        acc.emplace_back(mine.size(), 10.0f);
        perPeer.push_back({Xfer::send(p, out.back().data(), size, tag(2 * round)),
                           Xfer::recv(p, in.back().data(), size, tag(2 * round)),
                           Xfer::send(p, mine.data(), mine.size() * 4, tag(2 * round + 1)),
                           Xfer::recvReduce(p, acc.back().data(), mine.size() * 4, hetcclFloat32, RedKind::kSum,
                                            tag(2 * round + 1))});
      }
      // Odd ranks list their peers the other way round (each peer's messages stay in order).
      if (r % 2) std::reverse(perPeer.begin(), perPeer.end());
      std::vector<Xfer> x;
      for (const auto& v : perPeer) x.insert(x.end(), v.begin(), v.end());
      t->run(x);
      size_t k = 0;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        for (size_t i = 0; i < size; ++i)
          ASSERT_EQ(in[k][i], pattern(p, r, round, i)) << "round " << round << " from " << p << " byte " << i;
        for (float v : acc[k]) ASSERT_EQ(v, 10.0f + static_cast<float>(p + 1)) << "round " << round << " from " << p;
        ++k;
      }
    }
    b.barrier();
    // Abort from another thread: rank 0 waits for a message nobody sends.
    if (r == 0) {
      std::thread aborter([&] {
        for (auto end = Clock::now() + std::chrono::seconds(20); waiting.load() == 0 && Clock::now() < end;)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        aborts[0].store(true);
      });
      std::vector<uint8_t> buf(64);
      std::vector<Xfer> x{Xfer::recv(1, buf.data(), buf.size(), tag(99))};
      waiting.store(1);
      auto start = Clock::now();
      try {
        t->run(x);
        ADD_FAILURE() << "run returned without the message";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), hetcclRemoteError) << e.what();
        EXPECT_NE(std::string(e.what()).find("abort"), std::string::npos) << e.what();
      }
      EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
      aborter.join();
      abortTested.store(true);
    }
    // Peers keep their connections until rank 0 has seen its abort (bounded,
    // in case rank 0 failed before).
    for (auto end = Clock::now() + std::chrono::seconds(20); !abortTested.load() && Clock::now() < end;)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }));
}

INSTANTIATE_TEST_SUITE_P(Both, TsanTransport, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

// ---- the rendezvous root under concurrent ranks and hostile clients ----

TEST(TsanRoot, ManyRanksAndWrongSecretClientsAtOnce) {
  const int n = 8, hostile = 4;
  IdContents id = newJob(30);
  std::vector<std::vector<std::vector<uint8_t>>> tables(n);
  std::atomic<int> refused{0};
  auto errs = runRanks(n + hostile, [&](int t) {
    if (t >= n) {  // knows the address but not the secret
      IdContents bad = id;
      bad.secret[t % 32] ^= 0x5a;
      try {
        rendezvous(bad, t - n, n, std::vector<uint8_t>(16, 0xee), Deadline::in(10));
        ADD_FAILURE() << "a client without the secret joined";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), hetcclRemoteError) << e.what();
        EXPECT_NE(std::string(e.what()).find("secret"), std::string::npos) << e.what();
      }
      refused.fetch_add(1);
      return;
    }
    // The last rank joins only once every hostile client has been refused:
    // the root must still be listening when they come, or they would be
    // turned away for arriving late rather than for the secret.
    if (t == n - 1)
      for (auto end = Clock::now() + std::chrono::seconds(15); refused.load() < hostile && Clock::now() < end;)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    tables[t] = rendezvous(id, t, n, std::vector<uint8_t>(16, static_cast<uint8_t>(t)), Deadline::in(20));
  });
  expectAllOk(errs);
  for (int t = 0; t < n; ++t) {
    ASSERT_EQ(tables[t].size(), static_cast<size_t>(n)) << "rank " << t;
    for (int r = 0; r < n; ++r) EXPECT_EQ(tables[t][r], std::vector<uint8_t>(16, static_cast<uint8_t>(r)));
  }
}

// Regression (found by fuzz_root): RootServer::admit used to commit a client's nranks and record size before it
// checks the client's rank, so a client the root refuses ("rank 4 out of
// range") still decides what every later rank is held to: the two correct
// ranks below are refused with "rank 0 says nranks=2 but another rank said 3".
TEST(TsanRoot, ARefusedClientDoesNotBindTheOthers) {
  IdContents id = newJob(30);
  try {
    rendezvous(id, 4, 3, std::vector<uint8_t>(8, 9), Deadline::in(10));
    ADD_FAILURE() << "rank 4 of 3 joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), hetcclInvalidUsage) << e.what();
  }
  expectAllOk(runRanks(2, [&](int r) {
    auto table = rendezvous(id, r, 2, std::vector<uint8_t>(16, static_cast<uint8_t>(r)), Deadline::in(10));
    EXPECT_EQ(table.size(), 2u);
  }));
}

// ---- non-blocking communicators: the proxy thread ----

const char* const kGroups[] = {"a", "a", "b", "b"};

// Polls until the communicator is no longer in progress (or the deadline).
hetcclResult_t waitDone(hetcclComm_t comm, double seconds = 60) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  hetcclResult_t st = hetcclInProgress;
  while (Clock::now() < end) {
    if (hetcclCommGetAsyncError(comm, &st) != hetcclSuccess) return hetcclInternalError;
    if (st != hetcclInProgress) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return st;
}

class TsanProxy : public ::testing::TestWithParam<const char*> {};

// Ends a rank's use of its communicator on every path (a failed ASSERT
// returns early): stops the watcher thread, then aborts the communicator,
// so its proxy is gone before the buffers it may still use are freed.
// Declare it after the buffers; clear `comm` once it was destroyed.
struct RankGuard {
  hetcclComm_t comm = nullptr;
  std::atomic<bool> stop{false};
  std::thread watcher;
  ~RankGuard() {
    stop.store(true);
    if (watcher.joinable()) watcher.join();
    if (comm) hetcclCommAbort(comm);
  }
};

TEST_P(TsanProxy, QueuedCollectivesWhileAnotherThreadPolls) {
  const int n = 4, calls = 12;
  const size_t count = 5000;
  hetcclUniqueId uid;
  ASSERT_EQ(hetcclGetUniqueId(&uid), hetcclSuccess);
  expectAllOk(runRanks(n, [&](int r) {
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.groupName = kGroups[r];
    cfg.transport = GetParam();
    cfg.timeoutSeconds = 60;
    // Buffers stay alive until the communicator is gone (RankGuard).
    std::vector<std::vector<float>> sendb(calls), recvb(calls);
    RankGuard g;
    hetcclResult_t rc = hetcclCommInitRankConfig(&g.comm, n, uid, r, &cfg);
    ASSERT_TRUE(rc == hetcclInProgress || rc == hetcclSuccess) << hetcclGetErrorString(rc);
    ASSERT_NE(g.comm, nullptr);
    hetcclComm_t comm = g.comm;
    // Another thread of this rank watches the communicator the whole time.
    std::atomic<int> polls{0};
    g.watcher = std::thread([&] {
      while (!g.stop.load()) {
        hetcclResult_t st;
        EXPECT_EQ(hetcclCommGetAsyncError(comm, &st), hetcclSuccess);
        EXPECT_TRUE(st == hetcclSuccess || st == hetcclInProgress) << hetcclGetErrorString(st);
        polls.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    // Queue everything without waiting (init included).
    for (int c = 0; c < calls; ++c) {
      sendb[c].assign(count * n, static_cast<float>(r + c));
      recvb[c].assign(count * n, -1.0f);
      const float* s = sendb[c].data();
      float* d = recvb[c].data();
      switch (c % 6) {
        case 0: rc = hetcclAllReduce(s, d, count, hetcclFloat32, hetcclSum, comm, nullptr); break;
        case 1: rc = hetcclBroadcast(s, d, count, hetcclFloat32, c % n, comm, nullptr); break;
        case 2: rc = hetcclAllGather(s, d, count, hetcclFloat32, comm, nullptr); break;
        case 3: rc = hetcclReduceScatter(s, d, count, hetcclFloat32, hetcclMax, comm, nullptr); break;
        case 4: rc = hetcclAlltoAll(s, d, count, hetcclFloat32, comm, nullptr); break;
        default:
          ASSERT_EQ(hetcclGroupStart(), hetcclSuccess);
          ASSERT_EQ(hetcclSend(s, count, hetcclFloat32, (r + 1) % n, comm, nullptr), hetcclSuccess);
          ASSERT_EQ(hetcclRecv(d, count, hetcclFloat32, (r + n - 1) % n, comm, nullptr), hetcclSuccess);
          rc = hetcclGroupEnd();
      }
      ASSERT_EQ(rc, hetcclInProgress) << "call " << c << ": " << hetcclGetLastError(comm);
    }
    ASSERT_EQ(waitDone(comm), hetcclSuccess) << hetcclGetLastError(comm);
    g.stop.store(true);
    g.watcher.join();
    EXPECT_GT(polls.load(), 0);
    for (int c = 0; c < calls; ++c) {
      const std::vector<float>& d = recvb[c];
      for (size_t i = 0; i < count; ++i) {
        float want;
        switch (c % 6) {
          case 0: want = static_cast<float>(n * c + n * (n - 1) / 2); break;
          case 1: want = static_cast<float>(c % n + c); break;
          case 2: want = static_cast<float>(0 + c); break;  // block of rank 0
          case 3: want = static_cast<float>(n - 1 + c); break;
          case 4: want = static_cast<float>(0 + c); break;  // block from rank 0
          default: want = static_cast<float>((r + n - 1) % n + c);
        }
        ASSERT_EQ(d[i], want) << "call " << c << " element " << i;
      }
    }
    EXPECT_EQ(recvb[2][(n - 1) * count], static_cast<float>(n - 1 + 2));  // AllGather: last rank's block
    EXPECT_EQ(recvb[4][(n - 1) * count], static_cast<float>(n - 1 + 4));  // AlltoAll: from the last rank
    EXPECT_EQ(hetcclCommFinalize(comm), hetcclSuccess);
    EXPECT_EQ(hetcclCommDestroy(comm), hetcclSuccess);
    g.comm = nullptr;
  }));
}

// Ranks 0..2 queue an AllReduce that rank 3 never joins; each is aborted
// from a thread that is neither the rank's nor its proxy's.
TEST_P(TsanProxy, AbortFromAnotherThreadWhileTheProxyWaits) {
  const int n = 4;
  hetcclUniqueId uid;
  ASSERT_EQ(hetcclGetUniqueId(&uid), hetcclSuccess);
  std::vector<hetcclComm_t> comms(n, nullptr);
  std::atomic<int> queued{0};
  std::vector<std::vector<float>> bufs(n, std::vector<float>(100000, 1.0f));
  expectAllOk(runRanks(n, [&](int r) {
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.groupName = kGroups[r];
    cfg.transport = GetParam();
    cfg.timeoutSeconds = 60;
    hetcclResult_t rc = hetcclCommInitRankConfig(&comms[r], n, uid, r, &cfg);
    ASSERT_TRUE(rc == hetcclInProgress || rc == hetcclSuccess);
    ASSERT_EQ(waitDone(comms[r]), hetcclSuccess) << hetcclGetLastError(comms[r]);
    if (r < n - 1) {
      ASSERT_EQ(
          hetcclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), hetcclFloat32, hetcclSum, comms[r], nullptr),
          hetcclInProgress);
    }
    queued.fetch_add(1);
  }));
  // No ASSERT from here on: the aborts below must run whatever happened
  // above (the proxies may still use bufs).
  EXPECT_EQ(queued.load(), n);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the proxies are inside the AllReduce
  for (int r = 0; r < n - 1; ++r) {
    hetcclResult_t st = hetcclSuccess;
    EXPECT_EQ(hetcclCommGetAsyncError(comms[r], &st), hetcclSuccess);
    EXPECT_EQ(st, hetcclInProgress) << "rank " << r << " did not wait for rank " << n - 1;
  }
  auto start = Clock::now();
  expectAllOk(runRanks(n, [&](int r) {
    EXPECT_EQ(r < n - 1 ? hetcclCommAbort(comms[r]) : hetcclCommDestroy(comms[r]), hetcclSuccess)
        << hetcclGetLastError(nullptr);
  }));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
}

// Regression: hetcclCommSplit on a non-blocking communicator used to run at once on the caller's thread and uses the
// bootstrap ring, while the proxy thread runs the queued collectives, which with HETCCL_CHECK_MISMATCH=1 also use the
// bootstrap ring (one allgather per call). The two byte streams interleave: the split reads a garbage unique id or a
// wrong member count, and the collectives fail with "collective mismatch ... unknown collective". Without
// HETCCL_CHECK_MISMATCH it passes.
TEST_P(TsanProxy, SplitWhileQueuedCollectivesCheckForMismatch) {
  const int n = 4, calls = 50;
  setenv("HETCCL_CHECK_MISMATCH", "1", 1);
  hetcclUniqueId uid;
  ASSERT_EQ(hetcclGetUniqueId(&uid), hetcclSuccess);
  expectAllOk(runRanks(n, [&](int r) {
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.transport = GetParam();
    cfg.timeoutSeconds = 20;
    std::vector<std::vector<float>> b(calls, std::vector<float>(1000, 1.0f));
    RankGuard g;
    hetcclCommInitRankConfig(&g.comm, n, uid, r, &cfg);
    hetcclComm_t comm = g.comm;
    ASSERT_EQ(waitDone(comm), hetcclSuccess) << hetcclGetLastError(comm);
    for (auto& v : b)
      ASSERT_EQ(hetcclAllReduce(v.data(), v.data(), v.size(), hetcclFloat32, hetcclSum, comm, nullptr),
                hetcclInProgress);
    hetcclComm_t sub = nullptr;
    hetcclResult_t rs = hetcclCommSplit(comm, r % 2, r, &sub, nullptr);
    EXPECT_TRUE(rs == hetcclSuccess || rs == hetcclInProgress) << hetcclGetLastError(comm);
    EXPECT_EQ(waitDone(comm), hetcclSuccess) << hetcclGetLastError(comm);
    for (auto& v : b) EXPECT_EQ(v, std::vector<float>(1000, 4.0f));
    if (sub) {
      EXPECT_EQ(waitDone(sub), hetcclSuccess) << hetcclGetLastError(sub);
      int count = 0;
      EXPECT_EQ(hetcclCommCount(sub, &count), hetcclSuccess);
      EXPECT_EQ(count, 2);
      hetcclCommDestroy(sub);
    }
  }));
  unsetenv("HETCCL_CHECK_MISMATCH");
}

INSTANTIATE_TEST_SUITE_P(Both, TsanProxy, ::testing::Values("tcp", "shm"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
