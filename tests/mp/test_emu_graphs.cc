// Calls across groups captured into graphs (CUDA/HIP stream capture) on
// emulated GPUs, layouts 2+2 (a,a,b,b) and 1+1+2 (a,b,c,c): every
// collective captured once runs again at every replay with the inputs of
// that replay, and a group call with send/recv; replays back to back, two graphs of one communicator
// interleaved with eager calls between them; a graph destroyed while its
// replay runs; a rank that replays a call while a peer issues another
// fails on both; an abort during a replay releases the stream, and a replay
// after it too. Graph calls are found by name in the runtime hetccl loaded
// (emu_util.h runtimeFunction), so a real GPU can run them too.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "emu_util.h"
#include "flight_dumps.h"
#include "harness.h"
#include "layouts.h"

namespace hmp {
namespace {

// The runtime's capture and graph calls (CUDA's shapes).
struct Graphs {
  int (*begin)(void*, int) = nullptr;
  int (*end)(void*, void**) = nullptr;
  int (*instantiate)(void**, void*, unsigned long long) = nullptr;
  int (*launch)(void*, void*) = nullptr;
  int (*execDestroy)(void*) = nullptr;
  int (*destroy)(void*) = nullptr;
  explicit Graphs(const std::string& kind) {
    begin = reinterpret_cast<decltype(begin)>(runtimeFunction(kind, "StreamBeginCapture"));
    end = reinterpret_cast<decltype(end)>(runtimeFunction(kind, "StreamEndCapture"));
    instantiate = reinterpret_cast<decltype(instantiate)>(runtimeFunction(kind, "GraphInstantiateWithFlags"));
    launch = reinterpret_cast<decltype(launch)>(runtimeFunction(kind, "GraphLaunch"));
    execDestroy = reinterpret_cast<decltype(execDestroy)>(runtimeFunction(kind, "GraphExecDestroy"));
    destroy = reinterpret_cast<decltype(destroy)>(runtimeFunction(kind, "GraphDestroy"));
  }
  bool usable() const { return begin && end && instantiate && launch && execDestroy && destroy; }
};

// A graph captured from `body` (which enqueues on `stream`) and its exec.
struct Captured {
  const Graphs& g;
  void* graph = nullptr;
  void* exec = nullptr;
  template <class F>
  Captured(const Graphs& graphs, hetcclStream_t stream, F body) : g(graphs) {
    EXPECT_EQ(g.begin(stream, 0), 0);  // global mode, as torch.cuda.graph's default
    body();
    EXPECT_EQ(g.end(stream, &graph), 0) << "the capture failed";
    EXPECT_EQ(g.instantiate(&exec, graph, 0), 0);
  }
  void launch(hetcclStream_t s) const { EXPECT_EQ(g.launch(exec, s), 0); }
  void drop() {
    if (exec) {
      EXPECT_EQ(g.execDestroy(exec), 0);
    }
    if (graph) {
      EXPECT_EQ(g.destroy(graph), 0);
    }
    exec = graph = nullptr;
  }
  ~Captured() { drop(); }
};

// Two ranks (one GPU per group) run on the real GPU under HETCCL_TEST_GPU
// (two processes on it, as scripts/gpu-check.sh's faults step runs them);
// groups of several GPUs only on the emulated one.
JobOptions emuJob(const std::string& layout, bool border) {
  JobOptions o;
  const size_t n = std::count(layout.begin(), layout.end(), ',') + 1;
  o.devices = std::vector<std::string>(n, n == 2 ? testGpuKind() : std::string("emu"));
  borderEnv(o, border);
  return o;
}

class EmuGraphs : public ::testing::TestWithParam<const char*> {};

// AllReduce, Broadcast, Reduce, AllGather, ReduceScatter and AlltoAll in
// one graph (the device border on, which captured calls leave for the
// staged path); each replay's inputs differ, and each replay's outputs are
// checked.
TEST_P(EmuGraphs, EveryCollectiveCapturedOnceIsRightAfterEveryReplay) {
  runJob(GetParam(), emuJob(GetParam(), true), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable()) << "the " << r.device << " runtime's graph functions were not found";
    const int n = r.nranks, me = r.rank;
    const int32_t tri = n * (n + 1) / 2;
    const size_t c = 1000;
    DeviceBuffer arIn(r, c * 4), arOut(r, c * 4), bc(r, c * 4), rdOut(r, c * 4), agIn(r, c * 4), agOut(r, c * n * 4),
        rsIn(r, c * n * 4), rsOut(r, c * 4), aaIn(r, c * n * 4), aaOut(r, c * n * 4);
    r.progress("capture");
    Captured cap(g, r.stream, [&] {
      HC_EXPECT_OK(hetcclAllReduce(arIn.get(), arOut.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclBroadcast(bc.get(), bc.get(), c, hetcclInt32, 1, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclReduce(arIn.get(), rdOut.get(), c, hetcclInt32, hetcclSum, 0, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclAllGather(agIn.get(), agOut.get(), c, hetcclInt32, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclReduceScatter(rsIn.get(), rsOut.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclAlltoAll(aaIn.get(), aaOut.get(), c, hetcclInt32, r.comm, r.stream), r.comm);
    });
    syncStream(r);
    const int replays = fullTests() ? 50 : 12;
    for (int k = 0; k < replays; ++k) {
      r.progress("replay " + std::to_string(k));
      std::vector<int32_t> v(c), w(c * n);
      for (size_t i = 0; i < c; ++i) v[i] = (me + 1) * (k + 1) + static_cast<int32_t>(i % 7);
      arIn.upload(v.data(), c * 4);
      for (size_t i = 0; i < c; ++i) v[i] = me == 1 ? k * 1000 + static_cast<int32_t>(i) : -1;
      bc.upload(v.data(), c * 4);
      for (size_t i = 0; i < c; ++i) v[i] = me * 100000 + k * 10 + static_cast<int32_t>(i % 5);
      agIn.upload(v.data(), c * 4);
      for (size_t j = 0; j < c * n; ++j) w[j] = (me + 1) * (static_cast<int32_t>(j % 11) + k);
      rsIn.upload(w.data(), c * n * 4);
      for (size_t j = 0; j < c * n; ++j) w[j] = me * 1000000 + static_cast<int32_t>(j / c) * 1000 + k + j % 3;
      aaIn.upload(w.data(), c * n * 4);
      cap.launch(r.stream);
      syncStream(r);
      const std::vector<int32_t> ar = readBack(arOut, c), b = readBack(bc, c), rd = readBack(rdOut, c),
                                 ag = readBack(agOut, c * n), rs = readBack(rsOut, c), aa = readBack(aaOut, c * n);
      for (size_t i = 0; i < c; ++i) {
        const int32_t sum = tri * (k + 1) + n * static_cast<int32_t>(i % 7);
        ASSERT_EQ(ar[i], sum) << "AllReduce, replay " << k << ", element " << i;
        ASSERT_EQ(b[i], k * 1000 + static_cast<int32_t>(i)) << "Broadcast, replay " << k;
        if (me == 0) {
          ASSERT_EQ(rd[i], sum) << "Reduce, replay " << k;
        }
        ASSERT_EQ(rs[i], tri * (static_cast<int32_t>((me * c + i) % 11) + k)) << "ReduceScatter, replay " << k;
      }
      for (size_t j = 0; j < c * n; ++j) {
        const int32_t p = static_cast<int32_t>(j / c), i = static_cast<int32_t>(j % c);
        ASSERT_EQ(ag[j], p * 100000 + k * 10 + i % 5) << "AllGather, replay " << k;
        ASSERT_EQ(aa[j], p * 1000000 + me * 1000 + k + (me * static_cast<int32_t>(c) + i) % 3)
            << "AlltoAll, replay " << k;
      }
    }
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    EXPECT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
  });
}

// Two graphs of one communicator launched back to back and interleaved
// (A A B A B B, no wait between), with eager calls between two launches:
// everything runs in stream order. A: in-place AllReduce (x n each
// replay); B: AllGather of A's buffer.
TEST_P(EmuGraphs, TwoGraphsInterleavedBackToBackWithEagerCallsBetween) {
  runJob(GetParam(), emuJob(GetParam(), true), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const int n = r.nranks;
    const size_t c = 3000;
    DeviceBuffer a(r, c * 4), gathered(r, c * n * 4), eager(r, c * 4);
    a.upload(std::vector<int32_t>(c, 1).data(), c * 4);
    eager.upload(std::vector<int32_t>(c, 1).data(), c * 4);
    Captured A(g, r.stream, [&] {
      HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    });
    Captured B(g, r.stream, [&] {
      HC_EXPECT_OK(hetcclAllGather(a.get(), gathered.get(), c, hetcclInt32, r.comm, r.stream), r.comm);
    });
    A.launch(r.stream);
    A.launch(r.stream);
    for (int k = 0; k < 3; ++k)  // eager calls reuse the pinned blocks of those gone
      HC_ASSERT_OK(hetcclAllReduce(eager.get(), eager.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    B.launch(r.stream);
    A.launch(r.stream);
    B.launch(r.stream);
    B.launch(r.stream);
    syncStream(r);
    const int32_t n3 = n * n * n;
    EXPECT_EQ(readBack(a, c), std::vector<int32_t>(c, n3));
    EXPECT_EQ(readBack(gathered, c * n), std::vector<int32_t>(c * n, n3));
    EXPECT_EQ(readBack(eager, c), std::vector<int32_t>(c, n3)) << "the eager calls between the launches";
    for (int k = 0; k < 3; ++k)  // and after them, the graphs still live
      HC_ASSERT_OK(hetcclAllReduce(eager.get(), eager.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    syncStream(r);
    EXPECT_EQ(readBack(eager, c), std::vector<int32_t>(c, n3 * n3));
  });
}

// A graph and its exec destroyed while their replay waits for a slow peer:
// the replay still ends right, the staging goes after it, and the
// communicator goes on, its eager calls still staged: when a graph's calls
// go differs between ranks, so no rank goes back to the border.
TEST_P(EmuGraphs, AGraphDestroyedDuringItsReplay) {
  runJob(GetParam(), emuJob(GetParam(), true), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const size_t c = 2000;
    DeviceBuffer a(r, c * 4);
    a.upload(std::vector<int32_t>(c, r.rank).data(), c * 4);
    {
      Captured A(g, r.stream, [&] {
        HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      });
      if (r.rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others' replays wait
      A.launch(r.stream);
      A.drop();
    }
    syncStream(r);
    const int32_t sum = r.nranks * (r.nranks - 1) / 2;
    EXPECT_EQ(readBack(a, c), std::vector<int32_t>(c, sum));
    const hetcclCommInfo_t before = infoOf(r);
    warmUp(r);
    EXPECT_EQ(infoOf(r).pathCalls[hetcclPathStaged], before.pathCalls[hetcclPathStaged] + 1)
        << "an eager call after the graph went left the staged path";
  });
}

// A group call captured whole (torch's coalesced calls): a float Avg
// AllReduce and a ring of send/recv, replayed on new inputs.
TEST_P(EmuGraphs, AGroupCallCapturedWholeReplays) {
  runJob(GetParam(), emuJob(GetParam(), true), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const int n = r.nranks, me = r.rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t c = 500;
    DeviceBuffer avg(r, c * 4), out(r, c * 4), in(r, c * 4);
    Captured cap(g, r.stream, [&] {
      HC_EXPECT_OK(hetcclGroupStart(), nullptr);
      HC_EXPECT_OK(hetcclAllReduce(avg.get(), avg.get(), c, hetcclFloat32, hetcclAvg, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclSend(out.get(), c, hetcclInt32, next, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclRecv(in.get(), c, hetcclInt32, prev, r.comm, r.stream), r.comm);
      HC_EXPECT_OK(hetcclGroupEnd(), nullptr);
    });
    for (int k = 0; k < 6; ++k) {
      r.progress("replay " + std::to_string(k));
      const std::vector<float> f(c, static_cast<float>(2 * me + k));
      avg.upload(f.data(), c * 4);
      out.upload(iota(c, me * 1000 + k, 1).data(), c * 4);
      cap.launch(r.stream);
      syncStream(r);
      EXPECT_EQ(readFloats(avg, c), std::vector<float>(c, static_cast<float>(n - 1 + k))) << "replay " << k;
      EXPECT_EQ(readBack(in, c), iota(c, prev * 1000 + k, 1)) << "replay " << k;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuGraphs, ::testing::Values("a,a,b,b", "a,b,c,c"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param) == "a,a,b,b" ? "aabb" : "abcc";
                         });

// Ranks 0-2 replay a captured AllReduce while rank 3 issues a Broadcast:
// every rank fails, none hangs. The ranks wait on each other in group
// steps before any message of the mismatched calls meets another, so they
// fail on HETCCL_TIMEOUT_S (as NCCL would hang); with HETCCL_CHECK_MISMATCH
// every rank compares its call with the others' first and fails at once
// naming both calls.
void replayAgainstAnotherCall(bool check) {
  JobOptions o = emuJob("a,a,b,b", false);
  o.env.emplace_back("HETCCL_TIMEOUT_S", "5");
  if (check) o.env.emplace_back("HETCCL_CHECK_MISMATCH", "1");
  runJob("a,a,b,b", o, [check](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const size_t c = 1000;
    DeviceBuffer a(r, c * 4);
    auto t0 = std::chrono::steady_clock::now();
    hetcclResult_t res = hetcclSuccess;
    std::unique_ptr<Captured> cap;
    if (r.rank == 3) {
      res = hetcclBroadcast(a.get(), a.get(), c, hetcclInt32, 0, r.comm, r.stream);
    } else {
      cap = std::make_unique<Captured>(g, r.stream, [&] {
        HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      });
      cap->launch(r.stream);
    }
    const std::string text = awaitFailure(r, res, t0, 20);
    EXPECT_FALSE(text.empty()) << "rank " << r.rank << " did not fail";
    EXPECT_LT(secondsSince(t0), check ? 4 : 20);
    if (check) {
      EXPECT_NE(text.find("AllReduce"), std::string::npos) << text;
      EXPECT_NE(text.find("Broadcast"), std::string::npos) << text;
    }
  });
}

TEST(EmuGraphsMismatch, AReplayAgainstAnotherCallFailsEveryRankOnTheTimeout) { replayAgainstAnotherCall(false); }

TEST(EmuGraphsMismatch, AReplayAgainstAnotherCallFailsEveryRankNamingBothCalls) { replayAgainstAnotherCall(true); }

// A captured group call that names a second stream is refused before
// anything is enqueued: the capture stays valid and the communicator works.
TEST(EmuGraphsRefused, ACapturedGroupCallOnTwoStreams) {
  runJob("a,b", emuJob("a,b", false), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    hetcclStream_t other = nullptr;
    ASSERT_EQ(hetcclStreamCreate(r.device.c_str(), &other), hetcclSuccess);
    DeviceBuffer a(r, 64), b(r, 64);
    hetcclResult_t res = hetcclSuccess;
    std::string text;
    {
      Captured cap(g, r.stream, [&] {
        HC_EXPECT_OK(hetcclGroupStart(), nullptr);
        HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), 16, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
        HC_EXPECT_OK(hetcclAllReduce(b.get(), b.get(), 16, hetcclInt32, hetcclSum, r.comm, other), r.comm);
        res = hetcclGroupEnd();
        text = hetcclGetLastError(r.comm);
      });
      EXPECT_NE(cap.graph, nullptr) << "the capture was invalidated";
    }
    EXPECT_EQ(res, hetcclInvalidUsage);
    EXPECT_NE(text.find("several streams"), std::string::npos) << text;
    warmUp(r);
    EXPECT_EQ(hetcclStreamDestroy(r.device.c_str(), other), hetcclSuccess);
  });
}

// Rank 3 never replays: the others' replays wait, and an abort releases
// their streams at once; a replay after the abort is released at once too
// (its hand-off finds the communicator gone), and the graph goes after it.
TEST(EmuGraphsAbort, AnAbortDuringAReplayReleasesTheStream) {
  runJob("a,a,b,b", emuJob("a,a,b,b", false), [](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const size_t c = 1000;
    DeviceBuffer a(r, c * 4);
    Captured A(g, r.stream, [&] {
      HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    });
    if (r.rank == 3) return abortAfter(r, 2);
    A.launch(r.stream);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(hetcclCommAbort(r.comm), hetcclSuccess);
    r.comm = nullptr;
    syncStream(r);
    EXPECT_LT(secondsSince(t0), 1) << "the replay's stream waited past the abort";
    t0 = std::chrono::steady_clock::now();
    A.launch(r.stream);
    syncStream(r);
    EXPECT_LT(secondsSince(t0), 1) << "a replay after the abort waited";
    A.drop();
    reopenAlone(r);
  });
}

// An eager call after a capture is handed to the proxy when its stream
// reaches it: its flight record ends when the proxy has run it, not
// before (a hung call must not read as ended in a dump). Rank 0's stream is
// held behind a gate while its call waits there.
TEST(EmuGraphsFlight, AnEagerCallAfterACaptureEndsItsRecordOnlyOnceItRan) {
  char dir[] = "/tmp/hetccl-emu-graphs-flight-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  JobOptions o = emuJob("a,b", true);
  o.env.emplace_back("HETCCL_FLIGHT_DIR", dir);
  runJob("a,b", o, [&dir](Rank& r) {
    Graphs g(r.device);
    ASSERT_TRUE(g.usable());
    const size_t c = 1000;
    DeviceBuffer a(r, c * 4);
    a.upload(std::vector<int32_t>(c, 1).data(), c * 4);
    {
      Captured A(g, r.stream, [&] {
        HC_EXPECT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      });
      A.launch(r.stream);
    }
    syncStream(r);
    const size_t before = countOf(dumpOnceCompleted(r, 1, 2), "\"completed\"");
    {
      StreamGate gate(r, r.stream);
      ASSERT_TRUE(gate.armed());
      HC_ASSERT_OK(hetcclAllReduce(a.get(), a.get(), c, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // time for an early end to show
      raise(SIGUSR1);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const std::string held = readDump(dir, r.rank, 2);
      EXPECT_EQ(countOf(held, "\"completed\""), before) << "the held call's record ended before it ran\n" << held;
      gate.open();
      EXPECT_FALSE(gate.expired());
    }
    syncStream(r);
    EXPECT_EQ(readBack(a, c), std::vector<int32_t>(c, 4));
    EXPECT_EQ(countOf(dumpOnceCompleted(r, before + 1, 2), "\"completed\""), before + 1);
  });
  EXPECT_EQ(system((std::string("rm -rf ") + dir).c_str()), 0);
}

}  // namespace
}  // namespace hmp
