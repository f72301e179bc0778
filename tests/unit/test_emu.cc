// The emulated GPU's runtime (libhetccl-emu.so, src/emu/emu_runtime.h):
// what a GPU does that correctness depends on. Work enqueued on a stream
// runs after the call returned, in order; events and stream waits order
// streams; memory of the device is told apart from host memory; faults come
// on demand. Then the same runtime as hetccl's device kind "emu".
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "device/device.h"
#include "emu/emu_runtime.h"
#include "emu_test_util.h"

namespace {

using namespace std::chrono_literals;

using emu_test::Gate;
using emu_test::Stream;

// Polls `pred` for up to 5 s.
template <class P>
bool eventually(P pred) {
  for (auto end = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < end;) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

TEST(Emu, StreamWorkRunsAfterTheCallReturnedInOrder) {
  Stream st;
  Gate gate;
  std::mutex mu;
  std::vector<int> order;
  emuEnqueue(st.s, [&] { gate.pass(); });
  for (int i = 0; i < 5; ++i)
    emuEnqueue(st.s, [&, i] {
      std::lock_guard<std::mutex> g(mu);
      order.push_back(i);
    });
  // Every call returned while the first operation still waits.
  EXPECT_EQ(emuStreamQuery(st.s), emuErrorNotReady);
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(order.empty());
  }
  gate.open();
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(emuStreamQuery(st.s), emuSuccess);
}

TEST(Emu, CopiesAreAsynchronousAndOrdered) {
  Stream st;
  Gate gate;
  void* dev = nullptr;
  ASSERT_EQ(emuMalloc(&dev, 64), emuSuccess);
  std::vector<char> a(64, 'a'), b(64, 'b'), out(64, 0);
  emuEnqueue(st.s, [&] { gate.pass(); });
  ASSERT_EQ(emuMemcpyAsync(dev, a.data(), 64, 1, st.s), emuSuccess);
  ASSERT_EQ(emuMemcpyAsync(out.data(), dev, 64, 2, st.s), emuSuccess);
  ASSERT_EQ(emuMemcpyAsync(dev, b.data(), 64, 1, st.s), emuSuccess);
  EXPECT_EQ(out[0], 0) << "a copy ran before the stream reached it";
  gate.open();
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_EQ(std::string(out.data(), 64), std::string(64, 'a'));
  ASSERT_EQ(emuMemcpy(out.data(), dev, 64, 2), emuSuccess);
  EXPECT_EQ(std::string(out.data(), 64), std::string(64, 'b'));
  EXPECT_EQ(emuFree(dev), emuSuccess);
}

TEST(Emu, DeviceMemoryIsToldApartFromHostMemory) {
  ASSERT_EQ(emuSetDevice(2), emuSuccess);
  void *dev = nullptr, *pinned = nullptr;
  ASSERT_EQ(emuMalloc(&dev, 4096), emuSuccess);
  ASSERT_EQ(emuHostAlloc(&pinned, 4096, 0), emuSuccess);
  std::vector<char> plain(4096);
  emuPointerAttributes at{};
  ASSERT_EQ(emuPointerGetAttributes(&at, static_cast<char*>(dev) + 4095), emuSuccess);
  EXPECT_EQ(at.type, 2);
  EXPECT_EQ(at.device, 2);
  ASSERT_EQ(emuPointerGetAttributes(&at, static_cast<char*>(dev) + 4096), emuSuccess);
  EXPECT_NE(at.type, 2) << "one past the end of an allocation is not device memory";
  ASSERT_EQ(emuPointerGetAttributes(&at, pinned), emuSuccess);
  EXPECT_EQ(at.type, 1);
  void* mapped = nullptr;
  ASSERT_EQ(emuHostGetDevicePointer(&mapped, pinned, 0), emuSuccess);
  EXPECT_EQ(mapped, pinned);
  ASSERT_EQ(emuPointerGetAttributes(&at, plain.data()), emuSuccess);
  EXPECT_EQ(at.type, 0);
  ASSERT_EQ(emuHostRegister(plain.data(), plain.size(), 0), emuSuccess);
  ASSERT_EQ(emuPointerGetAttributes(&at, plain.data() + 100), emuSuccess);
  EXPECT_EQ(at.type, 1);
  EXPECT_EQ(emuHostRegister(plain.data(), plain.size(), 0), emuErrorInvalidValue) << "registered twice";
  ASSERT_EQ(emuHostUnregister(plain.data()), emuSuccess);
  ASSERT_EQ(emuPointerGetAttributes(&at, plain.data()), emuSuccess);
  EXPECT_EQ(at.type, 0);
  // Freeing with the wrong call is refused and frees nothing.
  EXPECT_EQ(emuFree(pinned), emuErrorInvalidValue);
  EXPECT_EQ(emuGetLastError(), emuErrorInvalidValue);
  EXPECT_EQ(emuGetLastError(), emuSuccess) << "reading the last error clears it";
  EXPECT_EQ(emuFreeHost(pinned), emuSuccess);
  EXPECT_EQ(emuFree(dev), emuSuccess);
  EXPECT_EQ(emuSetDevice(0), emuSuccess);
}

TEST(Emu, DevicesAreCountedAndChecked) {
  int n = 0, d = -1;
  ASSERT_EQ(emuGetDeviceCount(&n), emuSuccess);
  EXPECT_EQ(n, 8);  // HETCCL_EMU_DEVICES' default
  EXPECT_EQ(emuSetDevice(n), emuErrorInvalidDevice);
  EXPECT_EQ(emuSetDevice(-1), emuErrorInvalidDevice);
  ASSERT_EQ(emuSetDevice(n - 1), emuSuccess);
  ASSERT_EQ(emuGetDevice(&d), emuSuccess);
  EXPECT_EQ(d, n - 1);
  // Each thread has its own current device.
  std::thread([] {
    int other = -1;
    emuGetDevice(&other);
    EXPECT_EQ(other, 0);
  }).join();
  EXPECT_EQ(emuSetDevice(0), emuSuccess);
}

TEST(Emu, EventsOrderOneStreamAfterAnother) {
  Stream a, b;
  Gate gate;
  emuEvent_t ev = nullptr;
  ASSERT_EQ(emuEventCreateWithFlags(&ev, 0), emuSuccess);
  EXPECT_EQ(emuEventQuery(ev), emuSuccess) << "an event never recorded is complete";
  std::atomic<int> step{0};
  emuEnqueue(a.s, [&] { gate.pass(); });
  emuEnqueue(a.s, [&] { step.store(1); });
  ASSERT_EQ(emuEventRecord(ev, a.s), emuSuccess);
  ASSERT_EQ(emuStreamWaitEvent(b.s, ev, 0), emuSuccess);
  std::atomic<int> seenByB{-1};
  emuEnqueue(b.s, [&] { seenByB.store(step.load()); });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(emuEventQuery(ev), emuErrorNotReady);
  EXPECT_EQ(seenByB.load(), -1) << "stream b ran past its wait on the event";
  gate.open();
  ASSERT_EQ(emuEventSynchronize(ev), emuSuccess);
  ASSERT_EQ(emuStreamSynchronize(b.s), emuSuccess);
  EXPECT_EQ(seenByB.load(), 1);
  // A wait captures the work recorded so far: recording again later does
  // not hold back a wait issued before.
  Gate later;
  emuEnqueue(a.s, [&] { later.pass(); });
  ASSERT_EQ(emuStreamWaitEvent(b.s, ev, 0), emuSuccess);
  ASSERT_EQ(emuEventRecord(ev, a.s), emuSuccess);
  EXPECT_TRUE(eventually([&] { return emuStreamQuery(b.s) == emuSuccess; }));
  later.open();
  EXPECT_EQ(emuEventDestroy(ev), emuSuccess);
}

// Each record completes on its own, as on CUDA: a wait takes the record made
// last before it, and a later record on another stream whose work runs
// first does not let that wait go.
TEST(Emu, AWaitTakesItsRecordEvenWhenARecordOnAnotherStreamCompletesFirst) {
  Stream a, fast, waiter;
  Gate gate;
  emuEvent_t ev = nullptr;
  ASSERT_EQ(emuEventCreateWithFlags(&ev, 0x2), emuSuccess);
  emuEnqueue(a.s, [&] { gate.pass(); });
  ASSERT_EQ(emuEventRecord(ev, a.s), emuSuccess);
  ASSERT_EQ(emuStreamWaitEvent(waiter.s, ev, 0), emuSuccess);  // on the record on a
  std::atomic<bool> ran{false};
  emuEnqueue(waiter.s, [&] { ran.store(true); });
  ASSERT_EQ(emuEventRecord(ev, fast.s), emuSuccess);  // nothing ahead of it: completes at once
  ASSERT_EQ(emuStreamSynchronize(fast.s), emuSuccess);
  EXPECT_EQ(emuEventQuery(ev), emuSuccess) << "the last record (on the idle stream) has completed";
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load()) << "the wait went on before the record it took completed";
  gate.open();
  ASSERT_EQ(emuStreamSynchronize(waiter.s), emuSuccess);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(emuEventDestroy(ev), emuSuccess);
}

// Stream ids, as cudaStreamGetId's: each stream its own, for the process's
// life, also where a handle comes back for a new stream (the destroyed
// stream's work has run and freed it; how often the allocator gives the
// address back is recorded, not asserted: a sanitizer's quarantine never
// does).
TEST(Emu, AStreamMadeAfterAnotherWasDestroyedHasANewIdWhateverItsHandle) {
  std::map<unsigned long long, emuStream_t> seen;
  int handlesBack = 0;
  std::set<emuStream_t> handles;
  for (int i = 0; i < 64; ++i) {
    emuStream_t s = nullptr;
    ASSERT_EQ(emuStreamCreateWithFlags(&s, 0), emuSuccess);
    unsigned long long id = 0;
    ASSERT_EQ(emuStreamGetId(s, &id), emuSuccess);
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(seen.emplace(id, s).second) << "id " << id << " given twice";
    handlesBack += !handles.insert(s).second;
    ASSERT_EQ(emuStreamSynchronize(s), emuSuccess);
    ASSERT_EQ(emuStreamDestroy(s), emuSuccess);
    std::this_thread::sleep_for(1ms);  // its worker frees it
  }
  unsigned long long a = 0, b = 0;
  ASSERT_EQ(emuStreamGetId(nullptr, &a), emuSuccess);  // the default stream has one too
  ASSERT_EQ(emuStreamGetId(nullptr, &b), emuSuccess);
  EXPECT_EQ(a, b);
  EXPECT_EQ(seen.count(a), 0u);
  RecordProperty("handles_back", handlesBack);
}

// Stream capture as CUDA rules it: an event query from another thread in
// global mode during a global-mode capture fails and invalidates the
// capture; the same query in thread-local or relaxed mode, or during a
// relaxed capture, does not.
TEST(Emu, AnEventQueryDuringAGlobalCaptureInvalidatesItUnlessItsThreadIsLocal) {
  Stream cap, other;
  emuEvent_t ev = nullptr;
  ASSERT_EQ(emuEventCreateWithFlags(&ev, 0x2), emuSuccess);
  ASSERT_EQ(emuEventRecord(ev, other.s), emuSuccess);
  ASSERT_EQ(emuStreamSynchronize(other.s), emuSuccess);
  auto queryOnAnotherThread = [&](int mode) {
    int result = -1;
    std::thread([&] {
      int m = mode;
      EXPECT_EQ(emuThreadExchangeStreamCaptureMode(&m), emuSuccess);
      EXPECT_EQ(m, 0) << "a thread starts in global mode";
      result = emuEventQuery(ev);
    }).join();
    return result;
  };
  for (int captureMode : {0, 2}) {
    for (int queryMode : {0, 1, 2}) {
      ASSERT_EQ(emuStreamBeginCapture(cap.s, captureMode), emuSuccess);
      int status = -1;
      ASSERT_EQ(emuStreamIsCapturing(cap.s, &status), emuSuccess);
      EXPECT_EQ(status, 1);
      const bool refused = captureMode == 0 && queryMode == 0;
      EXPECT_EQ(queryOnAnotherThread(queryMode), refused ? emuErrorStreamCaptureUnsupported : emuSuccess)
          << "capture mode " << captureMode << ", query mode " << queryMode;
      emuGraph_t graph = nullptr;
      EXPECT_EQ(emuStreamEndCapture(cap.s, &graph), refused ? emuErrorStreamCaptureInvalidated : emuSuccess)
          << "capture mode " << captureMode << ", query mode " << queryMode;
      EXPECT_EQ(graph == nullptr, refused);
      if (graph) emuGraphDestroy(graph);
      ASSERT_EQ(emuStreamIsCapturing(cap.s, &status), emuSuccess);
      EXPECT_EQ(status, 0);
      emuGetLastError();
    }
  }
  EXPECT_EQ(emuEventDestroy(ev), emuSuccess);
}

// A capture ends on the thread that began it, unless it was begun in
// relaxed mode: from another thread EndCapture fails and the capture goes
// on (CUDA's cudaErrorStreamCaptureWrongThread).
TEST(Emu, ACaptureEndsOnItsOwnThreadUnlessRelaxed) {
  Stream st;
  for (int mode : {0, 1, 2}) {
    ASSERT_EQ(emuStreamBeginCapture(st.s, mode), emuSuccess) << mode;
    int other = -1;
    emuGraph_t graph = nullptr;
    std::thread([&] { other = emuStreamEndCapture(st.s, &graph); }).join();
    int status = -1;
    ASSERT_EQ(emuStreamIsCapturing(st.s, &status), emuSuccess);
    if (mode == 2) {
      EXPECT_EQ(other, emuSuccess);
      EXPECT_EQ(status, 0);
      emuGraphDestroy(graph);
      continue;
    }
    EXPECT_EQ(other, emuErrorStreamCaptureWrongThread) << mode;
    EXPECT_EQ(status, 1) << "the capture goes on";
    EXPECT_EQ(emuStreamEndCapture(st.s, &graph), emuSuccess) << mode;
    emuGraphDestroy(graph);
  }
  emuGetLastError();
}

TEST(Emu, StreamWaitsOnAValueInMemory) {
  Stream st;
  alignas(8) static uint64_t flag;
  __atomic_store_n(&flag, 0, __ATOMIC_RELEASE);
  std::atomic<bool> ran{false};
  ASSERT_EQ(emuStreamWaitValue64(st.s, reinterpret_cast<uint64_t>(&flag), 3, 0), emuSuccess);
  emuEnqueue(st.s, [&] { ran.store(true); });
  __atomic_store_n(&flag, 2, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load()) << "ran past a wait for >= 3 with the value at 2";
  __atomic_store_n(&flag, 5, __ATOMIC_RELEASE);
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_TRUE(ran.load());
  // A wait goes on only where CUDA's cyclic comparison ((int64_t)(flag -
  // value) >= 0) and HIP's unsigned one agree: ~0 releases nothing on CUDA
  // (it is -1 there), hetccl's release value does on both.
  ran.store(false);
  ASSERT_EQ(emuStreamWaitValue64(st.s, reinterpret_cast<uint64_t>(&flag), 7, 0), emuSuccess);
  emuEnqueue(st.s, [&] { ran.store(true); });
  __atomic_store_n(&flag, ~uint64_t{0}, __ATOMIC_RELEASE);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load()) << "~0 released a wait for >= 7: CUDA would not";
  __atomic_store_n(&flag, hetccl::kFlagReleased, __ATOMIC_RELEASE);
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(emuStreamWaitValue64(st.s, 0, 1, 0), emuErrorInvalidValue);
  EXPECT_EQ(emuStreamWaitValue64(st.s, reinterpret_cast<uint64_t>(&flag), 1, 7), emuErrorInvalidValue)
      << "only the >= wait exists";
}

void bump(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

TEST(Emu, HostFunctionsRunInStreamOrder) {
  Stream st;
  Gate gate;
  std::atomic<int> n{0};
  emuEnqueue(st.s, [&] { gate.pass(); });
  ASSERT_EQ(emuLaunchHostFunc(st.s, bump, &n), emuSuccess);
  ASSERT_EQ(emuLaunchHostFunc(st.s, bump, &n), emuSuccess);
  EXPECT_EQ(n.load(), 0);
  gate.open();
  ASSERT_EQ(emuStreamSynchronize(st.s), emuSuccess);
  EXPECT_EQ(n.load(), 2);
}

TEST(Emu, DestroyingAStreamReturnsAtOnceAndItsWorkStillRuns) {
  emuStream_t s = nullptr;
  ASSERT_EQ(emuStreamCreateWithFlags(&s, 0), emuSuccess);
  Gate gate;
  std::atomic<bool> ran{false};
  emuEnqueue(s, [&] { gate.pass(); });
  emuEnqueue(s, [&] { ran.store(true); });
  ASSERT_EQ(emuStreamDestroy(s), emuSuccess);  // would hang here if it waited
  EXPECT_FALSE(ran.load());
  gate.open();
  EXPECT_TRUE(eventually([&] { return ran.load(); }));
  EXPECT_EQ(emuStreamDestroy(s), emuErrorInvalidValue) << "destroyed twice";
}

TEST(Emu, DeviceSynchronizeWaitsForEveryStreamOfTheDevice) {
  Stream a, b;
  std::atomic<int> done{0};
  for (emuStream_t s : {a.s, b.s, static_cast<emuStream_t>(nullptr)})
    emuEnqueue(s, [&] {
      std::this_thread::sleep_for(10ms);
      done.fetch_add(1);
    });
  ASSERT_EQ(emuDeviceSynchronize(), emuSuccess);
  EXPECT_EQ(done.load(), 3);
}

// Faults on demand. Each stream takes the delays set when it was made.
TEST(Emu, CopyDelayAndStallHoldWorkBack) {
  setenv("HETCCL_EMU_COPY_DELAY_US", "200000", 1);
  Stream slow;
  unsetenv("HETCCL_EMU_COPY_DELAY_US");
  Stream fast;
  std::vector<char> src(16, 'x'), a(16, 0), b(16, 0);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(emuMemcpyAsync(a.data(), src.data(), 16, 0, slow.s), emuSuccess);
  ASSERT_EQ(emuMemcpyAsync(b.data(), src.data(), 16, 0, fast.s), emuSuccess);
  ASSERT_EQ(emuStreamSynchronize(fast.s), emuSuccess);
  EXPECT_EQ(b[0], 'x');
  EXPECT_EQ(emuStreamQuery(slow.s), emuErrorNotReady) << "the slow stream's copy came before its delay";
  ASSERT_EQ(emuStreamSynchronize(slow.s), emuSuccess);
  EXPECT_EQ(a[0], 'x');
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);

  setenv("HETCCL_EMU_STALL_US", "200000", 1);
  Stream stalled;
  unsetenv("HETCCL_EMU_STALL_US");
  std::atomic<bool> ran{false};
  t0 = std::chrono::steady_clock::now();
  emuEnqueue(stalled.s, [&] { ran.store(true); });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(ran.load());
  ASSERT_EQ(emuStreamSynchronize(stalled.s), emuSuccess);
  EXPECT_TRUE(ran.load());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
}

TEST(Emu, TheNthAllocationFailsOnDemand) {
  setenv("HETCCL_EMU_FAIL_ALLOC", "2", 1);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  EXPECT_EQ(emuMalloc(&a, 64), emuSuccess);
  EXPECT_EQ(emuMalloc(&b, 64), emuErrorMemoryAllocation);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(emuMalloc(&c, 64), emuSuccess);
  unsetenv("HETCCL_EMU_FAIL_ALLOC");
  emuFree(a);
  emuFree(c);
}

// hetccl's device kind "emu" over this runtime (HETCCL_EMU_LIB names it).
TEST(Emu, IsHetcclDeviceKindEmu) {
  auto d = hetccl::createDeviceRuntime("emu");
  EXPECT_STREQ(d->kind(), "emu");
  EXPECT_FALSE(d->synchronous());
  void* dev = d->alloc(256);
  std::vector<char> host(256);
  EXPECT_EQ(d->pointerKind(dev), hetccl::MemKind::kDevice);
  EXPECT_EQ(d->pointerKind(host.data()), hetccl::MemKind::kHost);
  void* pinned = d->allocPinned(256);
  EXPECT_EQ(d->pointerKind(pinned), hetccl::MemKind::kPinnedHost);
  d->freePinned(pinned);
  d->free(dev);
}

// The buffer check of a one-group call: device memory is remembered after
// the first query (so it still says device once freed: the vendor library
// then gets what it would without hetccl), anything else is asked each time.
TEST(Emu, BufferKindRemembersDeviceMemoryOnly) {
  auto d = hetccl::createDeviceRuntime("emu");
  void* dev = d->alloc(256);
  std::vector<char> host(256);
  EXPECT_EQ(d->bufferKind(dev), hetccl::MemKind::kDevice);
  EXPECT_EQ(d->bufferKind(dev), hetccl::MemKind::kDevice);
  EXPECT_EQ(d->bufferKind(host.data()), hetccl::MemKind::kHost);
  void* pinned = d->allocPinned(256);
  EXPECT_EQ(d->bufferKind(pinned), hetccl::MemKind::kPinnedHost);
  d->freePinned(pinned);
  d->free(dev);
  EXPECT_EQ(d->pointerKind(dev), hetccl::MemKind::kHost) << "the emulated runtime forgets a freed buffer";
  EXPECT_EQ(d->bufferKind(dev), hetccl::MemKind::kDevice) << "remembered";
  EXPECT_EQ(d->bufferKind(host.data()), hetccl::MemKind::kHost);
}

// hetccl's own streams at the device's greatest priority (kHighest), others
// at the default; emu's range is CUDA's numbering (lower is greater), and a
// priority outside it is clamped, as on CUDA.
TEST(Emu, StreamsOfTheGreatestPriorityAreMadeAndReported) {
  int least = 1, greatest = 1;
  ASSERT_EQ(emuDeviceGetStreamPriorityRange(&least, &greatest), emuSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_LT(greatest, least);
  auto d = hetccl::createDeviceRuntime("emu");
  hetccl::Stream high = d->createStream(hetccl::DeviceRuntime::Priority::kHighest);
  hetccl::Stream normal = d->createStream();
  EXPECT_EQ(d->streamPriority(high), greatest);
  EXPECT_EQ(d->streamPriority(normal), 0);
  d->destroyStream(high);
  d->destroyStream(normal);
  emuStream_t s = nullptr;
  ASSERT_EQ(emuStreamCreateWithPriority(&s, 0, greatest - 10), emuSuccess);
  int p = 0;
  ASSERT_EQ(emuStreamGetPriority(s, &p), emuSuccess);
  EXPECT_EQ(p, greatest);
  emuStreamDestroy(s);
}

TEST(Emu, AMalformedSettingIsRefusedByName) {
  setenv("HETCCL_EMU_STALL_US", "soon", 1);
  try {
    hetccl::createDeviceRuntime("emu");
    ADD_FAILURE() << "a malformed HETCCL_EMU_STALL_US was taken";
  } catch (const hetccl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("HETCCL_EMU_STALL_US"), std::string::npos) << e.what();
  }
  unsetenv("HETCCL_EMU_STALL_US");
}

}  // namespace
