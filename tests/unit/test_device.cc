// device/: the host runtime and the device-kind registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "device/device.h"
#include "device/gpu_api.h"
#include "device/hw_queues.h"
#include "device/call_sampler.h"
#include "device/issue_order.h"
#include "device/staging.h"
#include "border/device_border.h"
#include "border/border_choice.h"
#include "unit_util.h"

namespace hetccl {
namespace {

TEST(HostRuntime, KindAndSynchrony) {
  auto d = createDeviceRuntime("host");
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->kind(), "host");
  EXPECT_TRUE(d->synchronous());
}

TEST(HostRuntime, AllocIsAlignedWritableAndHost) {
  auto d = createDeviceRuntime("host");
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{3} << 20}) {
    void* p = d->alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes) memset(p, 0xab, bytes);
    EXPECT_EQ(d->pointerKind(p), MemKind::kHost);
    d->free(p);
  }
  int onStack = 0;
  EXPECT_EQ(d->pointerKind(&onStack), MemKind::kHost);
  d->free(nullptr);
}

TEST(HostRuntime, CopyIsImmediateAndHandlesOverlap) {
  auto d = createDeviceRuntime("host");
  std::vector<uint8_t> a(100), b(100, 0);
  for (int i = 0; i < 100; ++i) a[i] = static_cast<uint8_t>(i);
  d->copy(b.data(), a.data(), 100, nullptr);
  EXPECT_EQ(a, b);
  d->copy(a.data() + 10, a.data(), 50, nullptr);  // overlapping, forward
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a[10 + i], i);
  d->copy(b.data(), b.data() + 20, 50, nullptr);  // overlapping, backward
  for (int i = 0; i < 50; ++i) ASSERT_EQ(b[i], 20 + i);
  d->copy(b.data(), b.data(), 100, nullptr);  // self
  d->copy(nullptr, nullptr, 0, nullptr);      // nothing
  EXPECT_EQ(b[0], 20);
}

TEST(DeviceRegistry, UnknownKindNamesTheKnownKinds) {
  std::vector<std::string> kinds = deviceKinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "host"), kinds.end());
  for (const char* bad : {"cuda", "hip", "", "HOST"}) {
    SCOPED_TRACE(bad);
    auto err = test::catchError([&] { createDeviceRuntime(bad); });
    if (std::find(kinds.begin(), kinds.end(), bad) != kinds.end()) continue;  // available in this build
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->code(), hetcclInvalidArgument);
    EXPECT_TRUE(test::contains(err->what(), std::string("'") + bad + "'")) << err->what();
    for (const auto& k : kinds) EXPECT_TRUE(test::contains(err->what(), k)) << err->what();
  }
}

TEST(DeviceRegistry, MemKindNames) {
  EXPECT_STREQ(memKindName(MemKind::kHost), "host memory");
  EXPECT_STREQ(memKindName(MemKind::kPinnedHost), "pinned host memory");
  EXPECT_STREQ(memKindName(MemKind::kDevice), "device memory");
  EXPECT_STREQ(memKindName(MemKind::kOtherDevice), "another device's memory");
  EXPECT_STREQ(memKindName(MemKind::kUnknown), "unknown memory");
}

}  // namespace
}  // namespace hetccl

// ---- the device kernels plugin loader (src/device/kernels_plugin.h) ----
#include <unistd.h>

#include <fstream>

#include "device/kernels_plugin.h"

namespace hetccl {
namespace {

TEST(KernelsLoader, FileThatIsNoLibraryIsAClearError) {
  std::string path = "/tmp/hetccl-unit-kernels-" + std::to_string(getpid()) + ".so";
  { std::ofstream(path) << "not an ELF file\n"; }
  test::EnvGuard env("HETCCL_KERNELS_LIB", path.c_str());
  EXPECT_HETCCL_ERROR(loadKernels("cuda"), hetcclSystemError, "cannot load the cuda kernels plugin " + path);
  EXPECT_HETCCL_ERROR(loadKernels("cuda"), hetcclSystemError, "HETCCL_KERNELS_LIB");  // not cached
  unlink(path.c_str());
}

TEST(KernelsLoader, LibraryWithoutTheEntryIsNotAPlugin) {
  test::EnvGuard env("HETCCL_KERNELS_LIB", "libm.so.6");
  EXPECT_HETCCL_ERROR(loadKernels("hip"), hetcclInvalidUsage,
                      "libm.so.6 (HETCCL_KERNELS_LIB) is not a hetccl kernels plugin: it has no hetcclKernelsGetApi");
}

TEST(KernelsLoader, MissingGivenPathAndUnknownKind) {
  {
    test::EnvGuard env("HETCCL_KERNELS_LIB", "/nonexistent/libhetccl-cuda-kernels.so");
    EXPECT_HETCCL_ERROR(loadKernels("cuda"), hetcclSystemError, "/nonexistent/libhetccl-cuda-kernels.so");
  }
  EXPECT_HETCCL_ERROR(loadKernels("vulkan"), hetcclInvalidArgument, "'vulkan'");
  EXPECT_EQ(kernelsLibName("hip"), "libhetccl-hip-kernels.so");
}

TEST(KernelsLoader, AbsentPluginIsNullNotAnError) {
  // No plugin beside this test executable nor (normally) on the search path.
  test::EnvGuard env("HETCCL_KERNELS_LIB", nullptr);
  const hetcclKernelsApi_t* api = nullptr;
  ASSERT_NO_THROW(api = loadKernels("hip"));
  if (api) {
    EXPECT_STREQ(api->kind, "hip");  // installed system-wide: then it must be valid
  }
  EXPECT_EQ(loadKernels("hip"), api);  // cached
}

}  // namespace
}  // namespace hetccl

namespace hetccl {

// ---- GPU runtime loading and staging (no GPU needed) ----

TEST(GpuRuntime, MissingLibraryNamesPathAndVariable) {
  auto err = test::catchError([] { openGpuApi("cuda", "/nonexistent/libcudart.so.13"); });
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code(), hetcclSystemError);
  EXPECT_TRUE(test::contains(err->what(), "/nonexistent/libcudart.so.13")) << err->what();
  EXPECT_TRUE(test::contains(err->what(), "HETCCL_CUDA_LIB")) << err->what();
  err = test::catchError([] { openGpuApi("hip", "/nonexistent/libamdhip64.so"); });
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(test::contains(err->what(), "HETCCL_HIP_LIB")) << err->what();
}

TEST(GpuRuntime, WrongLibraryNamesTheMissingSymbol) {
  auto err = test::catchError([] { openGpuApi("cuda", "libm.so.6"); });
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(test::contains(err->what(), "cudaGetDeviceCount")) << err->what();
  EXPECT_TRUE(test::contains(err->what(), "libm.so.6")) << err->what();
}

TEST(GpuRuntime, UnknownKind) {
  auto err = test::catchError([] { openGpuApi("opencl", "x.so"); });
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code(), hetcclInvalidArgument);
  EXPECT_TRUE(test::contains(err->what(), "cuda, hip")) << err->what();
}

TEST(GpuRuntime, NoDeviceIsAClearErrorNotACrash) {
  // On a machine without a GPU (CI) creating a cuda rank fails cleanly; with
  // one it works and reports a stream-ordered runtime.
  std::unique_ptr<DeviceRuntime> d;
  auto err = test::catchError([&] { d = createDeviceRuntime("cuda"); });
  if (err) {
    EXPECT_TRUE(err->code() == hetcclSystemError || err->code() == hetcclInvalidUsage) << err->what();
    EXPECT_TRUE(test::contains(err->what(), "cuda")) << err->what();
  } else {
    ASSERT_TRUE(d);
    EXPECT_FALSE(d->synchronous());
    EXPECT_GE(d->deviceId(), 0);
  }
}

namespace {
// Counts what the pool allocates (plain heap memory stands in for pinned).
class CountingRuntime : public DeviceRuntime {
 public:
  const char* kind() const override { return "counting"; }
  MemKind pointerKind(const void*) const override { return MemKind::kHost; }
  void* alloc(size_t b) override { return allocPinned(b); }
  void free(void* p) override { freePinned(p); }
  void copy(void*, const void*, size_t, Stream) override {}
  bool synchronous() const override { return false; }
  void* allocPinned(size_t b) override {
    ++allocs;
    live += b;
    void* p = ::malloc(b);
    sizes[p] = b;
    return p;
  }
  void freePinned(void* p) override {
    live -= sizes[p];
    sizes.erase(p);
    ::free(p);
  }
  int allocs = 0;
  size_t live = 0;
  std::map<void*, size_t> sizes;
};
}  // namespace

TEST(StagingPool, GrowsReusesAndStaysUnderTheLimit) {
  CountingRuntime rt;
  {
    StagingPool pool(rt, 1 << 20, true);
    uint8_t* a = pool.get(0, 1000);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(pool.get(0, 500), a);  // big enough: reused
    EXPECT_EQ(rt.allocs, 1);
    uint8_t* b = pool.get(1, 4096);
    EXPECT_NE(b, a);
    EXPECT_EQ(pool.held(), rt.live);
    pool.get(0, 300000);  // grows slot 0
    EXPECT_EQ(pool.held(), rt.live);
    EXPECT_LE(pool.held(), size_t{1} << 20);
    auto err = test::catchError([&] { pool.get(2, 900000); });
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->code(), hetcclInvalidUsage);
    EXPECT_TRUE(test::contains(err->what(), "HETCCL_STAGING_MAX")) << err->what();
    EXPECT_EQ(pool.held(), rt.live);  // the failed request took nothing
    // Device scratch has a limit of its own, named when it is hit.
    StagingPool scratch(rt, 1 << 20, false);
    scratch.get(0, 600000);
    auto derr = test::catchError([&] { scratch.get(1, 600000); });
    ASSERT_TRUE(derr.has_value());
    EXPECT_TRUE(test::contains(derr->what(), "HETCCL_DEVICE_SCRATCH_MAX")) << derr->what();
  }
  EXPECT_EQ(rt.live, 0u);  // all returned
}

namespace {
// Stream handles the test names, each with the id the test gives it; the
// waits the staging state enqueues, as (stream, event).
class StreamIdRuntime : public CountingRuntime {
 public:
  const char* kind() const override { return "stream ids"; }
  Stream createStream(Priority) override { return reinterpret_cast<Stream>(++made); }
  void destroyStream(Stream) override {}
  Event createEvent() override { return reinterpret_cast<Event>(1000 + ++made); }
  void destroyEvent(Event) override {}
  void recordEvent(Event, Stream) override {}
  void streamWaitEvent(Stream s, Event e) override { waits.emplace_back(s, e); }
  uint64_t streamId(Stream s) override { return ids[s]; }
  std::map<Stream, uint64_t> ids;
  std::vector<std::pair<Stream, Event>> waits;
  uintptr_t made = 0;
};
}  // namespace

// Issue order: a call on the last call's stream does not wait; one on
// another stream, or on a handle that came back for a new stream (another
// id), waits for the last call's end; without ids, a handle alone proves
// nothing, so every call waits.
TEST(IssueOrder, ACallWaitsForTheLastUnlessItsStreamIsTheSameByHandleAndId) {
  StreamIdRuntime rt;
  EventPool events(rt);
  IssueOrder order(rt, events);
  const Stream a = reinterpret_cast<Stream>(uintptr_t{0x100}), b = reinterpret_cast<Stream>(uintptr_t{0x200});
  rt.ids[a] = 7;
  rt.ids[b] = 8;
  auto call = [&](Stream s) {
    rt.waits.clear();
    EXPECT_EQ(order.leadAfterLast({s}), s);
    order.markLast({s});
    return rt.waits.size();
  };
  EXPECT_EQ(call(a), 0u);  // the first call
  EXPECT_EQ(call(a), 0u);  // the same stream: stream order is enough
  EXPECT_EQ(call(b), 1u);  // another stream
  EXPECT_EQ(call(b), 0u);
  rt.ids[b] = 9;  // b destroyed, its handle given to a new stream
  EXPECT_EQ(call(b), 1u);
  EXPECT_EQ(rt.waits.front().first, b);
  EXPECT_EQ(call(b), 0u);
  rt.ids[a] = rt.ids[b] = 0;  // a runtime without stream ids
  EXPECT_EQ(call(b), 1u);
  EXPECT_EQ(call(b), 1u);
}

// Small calls' timing sample: one decision an enqueue (every call of a
// group call agrees), about one enqueue in `every`, each sample weighted by
// the enqueues since the last, and a pattern of period 2 sampled on both
// phases alike.
TEST(SmallCallSampler, SmallCallsAreSampledAtRandomGapsWeightedByTheGap) {
  SmallCallSampler sampler;
  constexpr uint64_t kEvery = 64, kEnqueues = 64000;
  uint64_t samples = 0, weights = 0, lastSampled = 0, phase[2] = {0, 0};
  for (uint64_t n = 1; n <= kEnqueues; ++n) {
    sampler.newEnqueue();
    const uint64_t w = sampler.sample(kEvery);
    EXPECT_EQ(sampler.sample(kEvery), w) << "a second call of the same enqueue";
    if (!w) continue;
    EXPECT_LE(w, 2 * kEvery - 1);
    EXPECT_EQ(w, n - lastSampled) << "the weight is the gap since the last sample";
    lastSampled = n;
    ++samples;
    weights += w;
    ++phase[n % 2];
  }
  EXPECT_EQ(weights, lastSampled);
  EXPECT_GT(samples, kEnqueues / kEvery * 9 / 10);
  EXPECT_LT(samples, kEnqueues / kEvery * 11 / 10);
  EXPECT_GT(phase[0], samples * 4 / 10);
  EXPECT_GT(phase[1], samples * 4 / 10);
}

}  // namespace hetccl

namespace hetccl {
namespace {

// HETCCL_GPU_BORDER's choice from the facts every rank shares (groups of
// any sizes: unequal ones take it for AllReduce; any hosts).
TEST(GpuPath, DeviceBorderOnlyForGpuGroups) {
  DeviceBorderFacts f;
  f.want = "auto";
  f.groupKinds = {"cuda", "hip"};  // two vendors: the case it is for
  EXPECT_EQ(deviceBorderWhyNot(f), "");
  f.want = "0";
  EXPECT_EQ(deviceBorderWhyNot(f), "HETCCL_GPU_BORDER=0");
  f.want = "1";
  EXPECT_EQ(deviceBorderWhyNot(f), "");  // on several hosts too: peers elsewhere are relayed
  f.groupKinds = {"cuda", "host"};       // a host group has no device to copy with
  EXPECT_EQ(deviceBorderWhyNot(f), kNotEveryRankSays);
  f.groupKinds = {"emu"};
  EXPECT_EQ(deviceBorderWhyNot(f), kNotEveryRankSays);  // one group: nothing crosses
}

// Two ranks on one physical GPU are time-sliced unless MPS shares both
// their contexts; ranks whose GPU is not known (0) never count as one GPU.
TEST(GpuPath, TimeSlicedOnlyWhereTwoRanksShareAGpuWithoutMps) {
  EXPECT_FALSE(DeviceBorder::timeSlicedGpus({11, 22, 33}, {false, false, false}));  // a GPU each
  EXPECT_TRUE(DeviceBorder::timeSlicedGpus({11, 22, 11}, {false, false, false}));   // ranks 0 and 2 share one
  EXPECT_TRUE(DeviceBorder::timeSlicedGpus({11, 22, 11}, {true, true, false}));     // one of them without MPS
  EXPECT_FALSE(DeviceBorder::timeSlicedGpus({11, 22, 11}, {true, false, true}));    // both under MPS
  EXPECT_FALSE(DeviceBorder::timeSlicedGpus({0, 0}, {false, false}));               // not known
  EXPECT_FALSE(DeviceBorder::timeSlicedGpus({}, {}));
}

// The number of CUDA hardware queues hetccl asks for at load
// (device/hw_queues.h): HETCCL_CUDA_CONNECTIONS where the environment sets
// none, nothing where it sets one or the setting is 0. And this test
// process, which links the library, got it at its start unless its
// environment set it.
TEST(HardwareQueues, SetWhereTheJobSetsNoneAndLeftWhereItDoes) {
  EXPECT_EQ(queuesToSet(nullptr, 32), 32);
  EXPECT_EQ(queuesToSet("", 32), 32);
  EXPECT_EQ(queuesToSet("1", 32), 0);
  EXPECT_EQ(queuesToSet("32", 16), 0);
  EXPECT_EQ(queuesToSet(nullptr, 0), 0);
  const HardwareQueues& q = hardwareQueues();
  const char* now = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (q.before.empty() && q.error.empty() && q.set > 0) {
    ASSERT_NE(now, nullptr);
    EXPECT_EQ(std::string(now), std::to_string(q.set));
    EXPECT_NE(describeHardwareQueues().find("set by hetccl"), std::string::npos) << describeHardwareQueues();
  } else if (!q.before.empty()) {
    ASSERT_NE(now, nullptr);
    EXPECT_EQ(std::string(now), q.before);
    EXPECT_EQ(q.set, 0);
  }
}

}  // namespace
}  // namespace hetccl
