// Calls of one communicator on several streams of the caller, on emulated
// GPUs that run slower than the host: the calls run in the order they were
// issued, whatever stream each names (as NCCL orders every launch of a
// communicator after the previous one), so a call reads what the one
// before it wrote on another stream, and two calls never share the
// communicator's scratch at once. Then stream capture (CUDA graphs): a call
// across groups on a capturing stream replays, and a capture on the
// application's thread survives hetccl's threads watching calls in flight.
// Layout a,b takes the test GPU kind, so scripts/gpu-check.sh runs these on
// a real GPU (step faults).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

struct StreamsCase {
  const char* name;
  const char* layout;
  bool border;  // the device border (64 KiB parts), else pinned staging
};

void PrintTo(const StreamsCase& c, std::ostream* os) { *os << c.name; }

const StreamsCase kStreamCases[] = {
    {"ab_border", "a,b", true},
    {"aabb_border", "a,a,b,b", true},
    {"aabb_staged", "a,a,b,b", false},
    {"aab_border", "a,a,b", true},
};

class EmuStreams : public ::testing::TestWithParam<StreamsCase> {};

// The case's layout (a,b on the test GPU kind, the others on emu) on a
// device slower than the host, so that calls queue up on the streams.
JobOptions slowDeviceJob(const StreamsCase& tc) {
  JobOptions o;
  const std::string layout = tc.layout;
  o.devices = layout == "a,b" ? std::vector<std::string>{testGpuKind(), testGpuKind()}
                              : std::vector<std::string>(std::count(layout.begin(), layout.end(), ',') + 1, "emu");
  borderEnv(o, tc.border);
  o.env.emplace_back("HETCCL_EMU_STALL_US", "200");
  o.env.emplace_back("HETCCL_EMU_COPY_DELAY_US", "500");
  return o;
}

// A second stream of the rank's device, destroyed with the object.
class SecondStream {
 public:
  explicit SecondStream(const Rank& r) : kind_(r.device) {
    EXPECT_EQ(hetcclStreamCreate(kind_.c_str(), &s_), hetcclSuccess) << "a second stream on " << kind_;
  }
  ~SecondStream() {
    if (s_) {
      EXPECT_EQ(hetcclStreamDestroy(kind_.c_str(), s_), hetcclSuccess);
    }
  }
  SecondStream(const SecondStream&) = delete;
  SecondStream& operator=(const SecondStream&) = delete;
  hetcclStream_t get() const { return s_; }
  void sync() const { EXPECT_EQ(hetcclStreamSynchronize(kind_.c_str(), s_), hetcclSuccess); }

 private:
  std::string kind_;
  hetcclStream_t s_ = nullptr;
};

TEST_P(EmuStreams, CallsOnTwoStreamsRunInIssueOrder) {
  const StreamsCase& tc = GetParam();
  runJob(tc.layout, slowDeviceJob(tc), [](Rank& r) {
    const int32_t n = r.nranks;
    const int me = r.rank;
    SecondStream second(r);
    ASSERT_NE(second.get(), nullptr);
    const hetcclStream_t streams[2] = {r.stream, second.get()};
    const size_t count = 70000;  // several 64 KiB parts

    r.progress("in-place AllReduce, each call on the other stream");
    DeviceBuffer chain(r, count * 4);
    chain.upload(std::vector<int32_t>(count, 1).data(), count * 4);
    for (int k = 0; k < 4; ++k)  // 1 -> n -> n^2 -> n^3 -> n^4
      HC_ASSERT_OK(hetcclAllReduce(chain.get(), chain.get(), count, hetcclInt32, hetcclSum, r.comm, streams[k % 2]),
                   r.comm);

    r.progress("ReduceScatter on the second stream, another at once on the first");
    const size_t blk = 30000;
    DeviceBuffer rsIn1(r, blk * n * 4), rsIn2(r, blk * n * 4), rsOut1(r, blk * 4), rsOut2(r, blk * 4);
    std::vector<int32_t> in1 = iota(blk * n, 1, 1), in2 = iota(blk * n, 5000, 3);
    for (auto& x : in1) x *= me + 1;
    for (auto& x : in2) x *= me + 1;
    rsIn1.upload(in1.data(), in1.size() * 4);
    rsIn2.upload(in2.data(), in2.size() * 4);
    HC_ASSERT_OK(hetcclReduceScatter(rsIn1.get(), rsOut1.get(), blk, hetcclInt32, hetcclSum, r.comm, streams[1]),
                 r.comm);
    HC_ASSERT_OK(hetcclReduceScatter(rsIn2.get(), rsOut2.get(), blk, hetcclInt32, hetcclSum, r.comm, streams[0]),
                 r.comm);

    r.progress("one group call on both streams, then a call on the first reading the second's result");
    DeviceBuffer x(r, count * 4), y(r, count * 4);
    x.upload(iota(count, 3, 1).data(), count * 4);
    y.upload(iota(count, 7, 2).data(), count * 4);
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclAllReduce(x.get(), x.get(), count, hetcclInt32, hetcclSum, r.comm, streams[0]), r.comm);
    HC_ASSERT_OK(hetcclAllReduce(y.get(), y.get(), count, hetcclInt32, hetcclSum, r.comm, streams[1]), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    HC_ASSERT_OK(hetcclAllReduce(y.get(), y.get(), count, hetcclInt32, hetcclSum, r.comm, streams[0]), r.comm);

    syncStream(r);
    second.sync();
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);

    EXPECT_EQ(readBack(chain, count), std::vector<int32_t>(count, n * n * n * n)) << "the chain across streams";
    const int32_t weights = n * (n + 1) / 2;
    std::vector<int32_t> want1(blk), want2(blk);
    for (size_t j = 0; j < blk; ++j) {
      want1[j] = weights * in1[me * blk + j] / (me + 1);
      want2[j] = weights * in2[me * blk + j] / (me + 1);
    }
    EXPECT_EQ(readBack(rsOut1, blk), want1) << "ReduceScatter on the second stream";
    EXPECT_EQ(readBack(rsOut2, blk), want2) << "ReduceScatter on the first stream, issued after it";
    std::vector<int32_t> wx = iota(count, 3, 1), wy = iota(count, 7, 2);
    for (auto& v : wx) v *= n;
    for (auto& v : wy) v *= n * n;
    EXPECT_EQ(readBack(x, count), wx) << "AllReduce of the group call on the first stream";
    EXPECT_EQ(readBack(y, count), wy) << "AllReduce on the first stream after the group call's on the second";
  });
}

// Calls each on a stream made for it and destroyed at once, its work still
// queued (cudaStreamDestroy returns at once): each call still runs after
// the one before it, which it reads. CUDA gives destroyed streams' handles
// to new streams (tests/gpu/test_kernels.cc counts them), which issue order
// tells apart by id; emu gives a handle back only once its stream's work
// has run, so there this checks the short-lived streams, and the unit test
// IssueOrder.ACallWaitsForTheLast... the rule for a handle that comes back.
TEST_P(EmuStreams, CallsOnStreamsMadeAndDestroyedOneByOneRunInIssueOrder) {
  const StreamsCase& tc = GetParam();
  runJob(tc.layout, slowDeviceJob(tc), [](Rank& r) {
    const int32_t n = r.nranks;
    const size_t count = 70000;  // several 64 KiB parts
    DeviceBuffer chain(r, count * 4);
    chain.upload(std::vector<int32_t>(count, 1).data(), count * 4);
    constexpr int kStreams = 6;
    int32_t want = 1;
    for (int k = 0; k < kStreams; ++k) {
      hetcclStream_t s = nullptr;
      ASSERT_EQ(hetcclStreamCreate(r.device.c_str(), &s), hetcclSuccess);
      HC_ASSERT_OK(hetcclAllReduce(chain.get(), chain.get(), count, hetcclInt32, hetcclSum, r.comm, s), r.comm);
      ASSERT_EQ(hetcclStreamDestroy(r.device.c_str(), s), hetcclSuccess);
      want *= n;
    }
    // The last call, on the rank's own stream, runs after them all.
    HC_ASSERT_OK(hetcclAllReduce(chain.get(), chain.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    want *= n;
    syncStream(r);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
    EXPECT_EQ(readBack(chain, count), std::vector<int32_t>(count, want)) << "the chain across short-lived streams";
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuStreams, ::testing::ValuesIn(kStreamCases),
                         [](const ::testing::TestParamInfo<StreamsCase>& i) { return std::string(i.param.name); });

// Stream capture through the rank's runtime (mode 0: global, the default
// of torch.cuda.graph).
struct Capture {
  int (*begin)(void*, int) = nullptr;
  int (*end)(void*, void**) = nullptr;
  int (*copy)(void*, const void*, size_t, int, void*) = nullptr;
  explicit Capture(const std::string& kind) {
    begin = reinterpret_cast<decltype(begin)>(runtimeFunction(kind, "StreamBeginCapture"));
    end = reinterpret_cast<decltype(end)>(runtimeFunction(kind, "StreamEndCapture"));
    copy = reinterpret_cast<decltype(copy)>(runtimeFunction(kind, "MemcpyAsync"));
  }
  bool usable() const { return begin && end && copy; }
};

// Layout a,b (the test GPU kind): a call across the groups on a stream
// being captured is captured (docs/design-gpu.md, Captured calls): the
// capture stays valid, and every launch of the graph runs the call again on
// that launch's input. The graph calls have CUDA's names and shapes.
TEST(EmuCapture, ACallAcrossGroupsOnACapturingStreamReplays) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, true);
  runJob("a,b", o, [](Rank& r) {
    Capture cap(r.device);
    ASSERT_TRUE(cap.usable()) << "the " << r.device << " runtime's capture functions were not found";
    auto instantiate = reinterpret_cast<int (*)(void**, void*, unsigned long long)>(
        runtimeFunction(r.device, "GraphInstantiateWithFlags"));
    auto launch = reinterpret_cast<int (*)(void*, void*)>(runtimeFunction(r.device, "GraphLaunch"));
    auto execDestroy = reinterpret_cast<int (*)(void*)>(runtimeFunction(r.device, "GraphExecDestroy"));
    auto graphDestroy = reinterpret_cast<int (*)(void*)>(runtimeFunction(r.device, "GraphDestroy"));
    ASSERT_TRUE(instantiate && launch && execDestroy && graphDestroy);
    SecondStream side(r);
    const size_t count = 1024;
    DeviceBuffer buf(r, count * 4), other(r, count * 4);
    ASSERT_EQ(cap.begin(side.get(), 0), 0);
    ASSERT_EQ(cap.copy(other.get(), buf.get(), count * 4, 3, side.get()), 0);  // device to device, captured
    HC_ASSERT_OK(hetcclAllReduce(buf.get(), buf.get(), count, hetcclInt32, hetcclSum, r.comm, side.get()), r.comm);
    void* graph = nullptr;
    ASSERT_EQ(cap.end(side.get(), &graph), 0) << "the capture was invalidated";
    void* exec = nullptr;
    ASSERT_EQ(instantiate(&exec, graph, 0), 0);
    for (int k = 1; k <= 5; ++k) {
      buf.upload(std::vector<int32_t>(count, k * (r.rank + 1)).data(), count * 4);
      ASSERT_EQ(launch(exec, side.get()), 0);
      side.sync();
      EXPECT_EQ(readBack(buf, count), std::vector<int32_t>(count, 3 * k)) << "launch " << k;
      EXPECT_EQ(readBack(other, count), std::vector<int32_t>(count, k * (r.rank + 1))) << "launch " << k;
    }
    EXPECT_EQ(execDestroy(exec), 0);
    EXPECT_EQ(graphDestroy(graph), 0);
    warmUp(r);  // the communicator goes on
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    EXPECT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
  });
}

// Layout a,b: while border calls are in flight (the proxy polls their
// events), the application captures a graph on another stream in global
// mode. CUDA refuses an event query from another thread during such a
// capture and invalidates it; hetccl's queries run in thread-local mode, so
// the capture ends well and the calls are right.
TEST(EmuCapture, AGlobalCaptureSurvivesCallsInFlight) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, true);
  o.env.emplace_back("HETCCL_EMU_COPY_DELAY_US", "300");
  runJob("a,b", o, [](Rank& r) {
    Capture cap(r.device);
    ASSERT_TRUE(cap.usable()) << "the " << r.device << " runtime's capture functions were not found";
    SecondStream side(r);
    const size_t count = size_t{1} << 20;  // 4 MiB: 64 parts a call
    DeviceBuffer buf(r, count * 4), a(r, 4096), b(r, 4096);
    buf.upload(std::vector<int32_t>(count, 1).data(), count * 4);
    // Rank 1 comes late, so rank 0's calls wait (its proxy polling them)
    // through rank 0's capture, however fast the device.
    if (r.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    for (int k = 0; k < 4; ++k)  // 1 -> 2 -> 4 -> 8 -> 16
      HC_ASSERT_OK(hetcclAllReduce(buf.get(), buf.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    if (r.rank == 0) {
      ASSERT_EQ(cap.begin(side.get(), 0), 0);
      ASSERT_EQ(cap.copy(b.get(), a.get(), 4096, 3, side.get()), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the proxy polls meanwhile
      void* graph = nullptr;
      EXPECT_EQ(cap.end(side.get(), &graph), 0) << "the capture was invalidated while calls were in flight";
    }
    syncStream(r);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
    EXPECT_EQ(readBack(buf, count), std::vector<int32_t>(count, 16));
  });
}

}  // namespace
}  // namespace hmp
