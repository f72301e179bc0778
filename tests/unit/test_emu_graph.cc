// The emulated runtime's graphs (src/emu/emu_graph.h): work enqueued while
// a stream is captured is recorded, not run; every launch of the
// instantiated graph runs it again in its order, the dependencies between
// streams that joined the capture kept; CUDA's errors for a capture that
// does not join back or waits on work outside it; user objects released
// when the last graph, exec or launch holding them goes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "emu/emu_runtime.h"
#include "emu_test_util.h"

namespace {

using namespace std::chrono_literals;

struct Event {
  emuEvent_t e = nullptr;
  Event() { EXPECT_EQ(emuEventCreateWithFlags(&e, 0x2), emuSuccess); }
  ~Event() { emuEventDestroy(e); }
};

using emu_test::Gate;
using emu_test::Stream;

int status(emuStream_t s) {
  int st = -1;
  EXPECT_EQ(emuStreamIsCapturing(s, &st), emuSuccess);
  return st;
}

void addOne(void* p) { ++*static_cast<std::atomic<int>*>(p); }

// A copy, a host function and a value write, captured once: nothing runs
// while capturing; each of 50 launches copies the input as it is then
// (changed between launches, as a training step's), runs the host function
// and stores the value again.
TEST(EmuGraph, EveryLaunchRunsTheCapturedWorkAgainInOrder) {
  Stream st;
  int32_t in = 0, out = -1;
  alignas(8) uint64_t flag = 0;
  std::atomic<int> calls{0};
  ASSERT_EQ(emuStreamBeginCapture(st.s, 0), emuSuccess);
  ASSERT_EQ(emuMemcpyAsync(&out, &in, sizeof(in), 4, st.s), emuSuccess);
  ASSERT_EQ(emuLaunchHostFunc(st.s, addOne, &calls), emuSuccess);
  ASSERT_EQ(emuStreamWriteValue64(st.s, reinterpret_cast<uint64_t>(&flag), 7, 0), emuSuccess);
  emuGraph_t graph = nullptr;
  ASSERT_EQ(emuStreamEndCapture(st.s, &graph), emuSuccess);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_EQ(out, -1) << "captured work ran at capture";
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(flag, 0u);
  emuGraphExec_t exec = nullptr;
  ASSERT_EQ(emuGraphInstantiate(&exec, graph, 0), emuSuccess);
  for (int k = 1; k <= 50; ++k) {
    in = 100 + k;
    flag = 0;
    ASSERT_EQ(emuGraphLaunch(exec, st.s), emuSuccess);
    ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
    ASSERT_EQ(out, 100 + k) << "launch " << k;
    ASSERT_EQ(calls.load(), k);
    ASSERT_EQ(flag, 7u);
  }
  EXPECT_EQ(emuGraphExecDestroy(exec), emuSuccess);
  EXPECT_EQ(emuGraphDestroy(graph), emuSuccess);
}

// A second stream joins the capture by waiting on an event recorded in it
// and is joined back the same way: each launch runs the joined stream's
// slow work before the first stream's work that waited for it.
TEST(EmuGraph, AJoinedStreamKeepsItsDependenciesInEveryLaunch) {
  Stream s0, s1;
  Event fork, join;
  std::atomic<int> x{0};
  int seen = -1;
  ASSERT_EQ(emuStreamBeginCapture(s0.s, 0), emuSuccess);
  ASSERT_EQ(emuEventRecord(fork.e, s0.s), emuSuccess);
  ASSERT_EQ(emuStreamWaitEvent(s1.s, fork.e, 0), emuSuccess);
  EXPECT_EQ(status(s1.s), 1) << "the waiting stream joined the capture";
  emuEnqueue(s1.s, [&] {
    std::this_thread::sleep_for(5ms);
    x.fetch_add(1);
  });
  ASSERT_EQ(emuEventRecord(join.e, s1.s), emuSuccess);
  ASSERT_EQ(emuStreamWaitEvent(s0.s, join.e, 0), emuSuccess);
  emuEnqueue(s0.s, [&] { seen = x.load(); });
  emuGraph_t graph = nullptr;
  ASSERT_EQ(emuStreamEndCapture(s0.s, &graph), emuSuccess);
  EXPECT_EQ(status(s1.s), 0) << "the joined stream left the capture with it";
  emuGraphExec_t exec = nullptr;
  ASSERT_EQ(emuGraphInstantiate(&exec, graph, 0), emuSuccess);
  ASSERT_EQ(emuGraphDestroy(graph), emuSuccess);  // the exec lives on without it
  for (int k = 1; k <= 10; ++k) {
    ASSERT_EQ(emuGraphLaunch(exec, s0.s), emuSuccess);
    ASSERT_EQ(emuStreamSynchronize(s0.s), emuSuccess);
    ASSERT_EQ(seen, k) << "launch " << k << " ran the first stream before the joined one";
  }
  EXPECT_EQ(emuGraphExecDestroy(exec), emuSuccess);
}

// As CUDA: a joined stream with work after its last join makes EndCapture
// fail (unjoined); a capturing stream that waits on an event recorded
// outside the capture invalidates it (isolation).
TEST(EmuGraph, CaptureErrorsAreCudas) {
  Stream s0, s1, s2;
  Event fork, outside;
  ASSERT_EQ(emuStreamBeginCapture(s0.s, 0), emuSuccess);
  ASSERT_EQ(emuEventRecord(fork.e, s0.s), emuSuccess);
  ASSERT_EQ(emuStreamWaitEvent(s1.s, fork.e, 0), emuSuccess);
  emuEnqueue(s1.s, [] {});
  emuGraph_t graph = reinterpret_cast<emuGraph_t>(1);
  EXPECT_EQ(emuStreamEndCapture(s1.s, &graph), emuErrorStreamCaptureUnmatched) << "ended on a joined stream";
  EXPECT_EQ(emuStreamEndCapture(s0.s, &graph), emuErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(status(s0.s), 0);
  EXPECT_EQ(status(s1.s), 0);

  ASSERT_EQ(emuEventRecord(outside.e, s2.s), emuSuccess);
  ASSERT_EQ(emuStreamBeginCapture(s0.s, 0), emuSuccess);
  EXPECT_EQ(emuStreamWaitEvent(s0.s, outside.e, 0), emuErrorStreamCaptureIsolation);
  EXPECT_EQ(status(s0.s), 2);
  EXPECT_EQ(emuStreamEndCapture(s0.s, &graph), emuErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  emuGetLastError();
}

void countDestroy(void* p) { ++*static_cast<std::atomic<int>*>(p); }

// A user object moved into the graph being captured (found through
// emuStreamGetCaptureInfo) lives while the graph, an exec of it or a launch
// in flight holds it, and is destroyed once, when the last of them goes.
TEST(EmuGraph, AUserObjectGoesWithTheLastGraphExecOrLaunchHoldingIt) {
  Stream st;
  std::atomic<int> destroyed{0};
  Gate gate;
  ASSERT_EQ(emuStreamBeginCapture(st.s, 0), emuSuccess);
  int capStatus = -1;
  unsigned long long id = 0;
  emuGraph_t building = nullptr;
  ASSERT_EQ(emuStreamGetCaptureInfo(st.s, &capStatus, &id, &building, nullptr, nullptr), emuSuccess);
  EXPECT_EQ(capStatus, 1);
  EXPECT_NE(id, 0u);
  ASSERT_NE(building, nullptr);
  emuUserObject_t obj = nullptr;
  EXPECT_EQ(emuUserObjectCreate(&obj, &destroyed, countDestroy, 1, 0), emuErrorInvalidValue) << "flags must be 1";
  ASSERT_EQ(emuUserObjectCreate(&obj, &destroyed, countDestroy, 1, 1), emuSuccess);
  ASSERT_EQ(emuGraphRetainUserObject(building, obj, 1, 1), emuSuccess);  // moved: the graph's alone
  emuEnqueue(st.s, [&] { gate.pass(); });
  emuGraph_t graph = nullptr;
  ASSERT_EQ(emuStreamEndCapture(st.s, &graph), emuSuccess);
  ASSERT_EQ(graph, building);
  emuGraphExec_t exec = nullptr;
  ASSERT_EQ(emuGraphInstantiate(&exec, graph, 0), emuSuccess);
  ASSERT_EQ(emuGraphDestroy(graph), emuSuccess);
  EXPECT_EQ(destroyed.load(), 0) << "the exec still holds it";
  ASSERT_EQ(emuGraphLaunch(exec, st.s), emuSuccess);
  ASSERT_EQ(emuGraphExecDestroy(exec), emuSuccess);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(destroyed.load(), 0) << "the launch in flight still holds it";
  gate.open();
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_EQ(destroyed.load(), 1);
}

// Two launches of one exec on two streams run one after the other, as
// CUDA orders launches of one exec.
TEST(EmuGraph, LaunchesOfOneExecDoNotOverlap) {
  Stream cap, a, b;
  std::atomic<int> inside{0}, most{0};
  ASSERT_EQ(emuStreamBeginCapture(cap.s, 0), emuSuccess);
  emuEnqueue(cap.s, [&] {
    const int now = inside.fetch_add(1) + 1;
    for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
    }
    std::this_thread::sleep_for(10ms);
    inside.fetch_sub(1);
  });
  emuGraph_t graph = nullptr;
  ASSERT_EQ(emuStreamEndCapture(cap.s, &graph), emuSuccess);
  emuGraphExec_t exec = nullptr;
  ASSERT_EQ(emuGraphInstantiate(&exec, graph, 0), emuSuccess);
  for (int k = 0; k < 4; ++k) ASSERT_EQ(emuGraphLaunch(exec, k % 2 ? b.s : a.s), emuSuccess);
  ASSERT_EQ(emuStreamSynchronize(a.s), emuSuccess);
  ASSERT_EQ(emuStreamSynchronize(b.s), emuSuccess);
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(emuGraphExecDestroy(exec), emuSuccess);
  EXPECT_EQ(emuGraphDestroy(graph), emuSuccess);
}

}  // namespace
