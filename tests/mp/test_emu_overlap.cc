// A GPU rank's calls across groups run beside the rank's other streams and
// cost the calling thread a few stream operations, whatever their size:
// - while a host function holds another stream of the rank (the
//   application's compute), every collective and send/recv across groups
//   on the rank's stream completes: none waits for a stream it was not
//   given (the gate names one that did);
// - a large call through the device border costs the calling thread two
//   stream operations on its stream (the proxy enqueues the border's work,
//   algorithm/proxy_launch.h), where enqueueing it on the calling thread
//   costs dozens (counted by the emulated runtime, so the check needs no
//   clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

struct OverlapCase {
  const char* name;
  const char* layout;
  const char* devices;  // nullptr: the test GPU kind for every rank
  std::vector<std::pair<std::string, std::string>> env;
};

void PrintTo(const OverlapCase& c, std::ostream* os) { *os << c.name; }

// Every call on the device border (64 KiB parts): small ones enqueued by
// the calling thread (HETCCL_GPU_INLINE_MAX's default), large ones through
// the proxy; every call through the proxy; groups of two, whose group
// steps run on the launch stream too.
const OverlapCase kOverlapCases[] = {
    {"ab", "a,b", nullptr, {{"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
    {"ab_launched",
     "a,b",
     nullptr,
     {{"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}, {"HETCCL_GPU_INLINE_MAX", "0"}}},
    {"aabb", "a,a,b,b", "emu,emu,emu,emu", {{"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
};

class EmuOverlap : public ::testing::TestWithParam<OverlapCase> {};

TEST_P(EmuOverlap, CallsAcrossGroupsCompleteWhileAnotherStreamIsHeld) {
  JobOptions o;
  const char* devices = GetParam().devices;
  o.devices = devices ? parseDevices(devices) : std::vector<std::string>{testGpuKind(), testGpuKind()};
  o.env = GetParam().env;
  o.env.emplace_back("HETCCL_GPU_BORDER", "1");
  runJob(GetParam().layout, o, [](Rank& r) {
    const int n = r.nranks, me = r.rank, next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t small = 1000, large = 300000, blk = 20000;
    DeviceBuffer a(r, small * 4), b(r, large * 4), agOut(r, blk * 4 * n), rsIn(r, blk * 4 * n), rsOut(r, blk * 4),
        bc(r, blk * 4), out(r, blk * 4), in(r, blk * 4);
    a.upload(std::vector<int32_t>(small, me + 1).data(), small * 4);
    b.upload(std::vector<int32_t>(large, me + 1).data(), large * 4);
    std::vector<int32_t> agInit(blk * n, -1);
    const std::vector<int32_t> mine = iota(blk, me * 1000, 5);
    std::copy(mine.begin(), mine.end(), agInit.begin() + me * blk);
    agOut.upload(agInit.data(), blk * 4 * n);
    rsIn.upload(iota(blk * n, me * 100, 1).data(), blk * 4 * n);
    bc.upload(iota(blk, me * 10000, 3).data(), blk * 4);
    out.upload(iota(blk, me * 10000, 7).data(), blk * 4);
    syncStream(r);
    hetcclStream_t busy = nullptr;
    HC_ASSERT_OK(hetcclStreamCreate(r.device.c_str(), &busy), nullptr);
    {
      StreamGate gate(r, busy);  // the application's compute, on another stream of this rank
      ASSERT_TRUE(gate.armed());
      r.progress("calls across groups while another stream is held");
      HC_ASSERT_OK(hetcclAllReduce(a.get(), a.get(), small, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), large, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclAllGather(static_cast<char*>(agOut.get()) + me * blk * 4, agOut.get(), blk, hetcclInt32,
                                   r.comm, r.stream),
                   r.comm);
      HC_ASSERT_OK(hetcclReduceScatter(rsIn.get(), rsOut.get(), blk, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclBroadcast(bc.get(), bc.get(), blk, hetcclInt32, n - 1, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclGroupStart(), nullptr);
      HC_ASSERT_OK(hetcclSend(out.get(), blk, hetcclInt32, next, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclRecv(in.get(), blk, hetcclInt32, prev, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclGroupEnd(), nullptr);
      syncStream(r);  // the gate gives up after StreamGate::kHoldS, should a call wait for `busy`
      EXPECT_FALSE(gate.expired()) << "a call across groups waited for another stream of its rank ("
                                   << StreamGate::kHoldS << " s)";
    }
    HC_EXPECT_OK(hetcclStreamSynchronize(r.device.c_str(), busy), nullptr);
    HC_EXPECT_OK(hetcclStreamDestroy(r.device.c_str(), busy), nullptr);
    const int32_t sum = n * (n + 1) / 2;
    EXPECT_EQ(readBack(a, small), std::vector<int32_t>(small, sum));
    EXPECT_EQ(readBack(b, large), std::vector<int32_t>(large, sum));
    std::vector<int32_t> gathered;
    for (int q = 0; q < n; ++q) {
      const std::vector<int32_t> part = iota(blk, q * 1000, 5);
      gathered.insert(gathered.end(), part.begin(), part.end());
    }
    EXPECT_EQ(readBack(agOut, blk * n), gathered);
    std::vector<int32_t> rsWant(blk, 0);
    for (int q = 0; q < n; ++q) {
      const std::vector<int32_t> all = iota(blk * n, q * 100, 1);
      for (size_t i = 0; i < blk; ++i) rsWant[i] += all[me * blk + i];
    }
    EXPECT_EQ(readBack(rsOut, blk), rsWant);
    EXPECT_EQ(readBack(bc, blk), iota(blk, (n - 1) * 10000, 3));
    EXPECT_EQ(readBack(in, blk), iota(blk, prev * 10000, 7));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuOverlap, ::testing::ValuesIn(kOverlapCases),
                         [](const ::testing::TestParamInfo<OverlapCase>& i) { return std::string(i.param.name); });

// Stream operations the calling thread enqueues for an AllReduce of 4 MiB
// across two groups of one (64 slices of 64 KiB parts): through the proxy
// (the default from HETCCL_GPU_INLINE_MAX on) an event record and a wait
// on its stream, plus the call's end for the issue order; enqueued on the
// calling thread (HETCCL_GPU_INLINE_MAX above it) every slice's copies,
// waits, stores and folds. The second run shows the count can tell the two
// apart. emu alone counts them.
void countEnqueued(const char* inlineMax, bool launched) {
  JobOptions o;
  o.devices = {"emu", "emu"};
  o.env = {{"HETCCL_GPU_BORDER", "1"},
           {"HETCCL_GPU_BORDER_MIN", "0"},
           {"HETCCL_GPU_BORDER_CHUNK", "65536"},
           {"HETCCL_GPU_INLINE_MAX", inlineMax}};
  runJob("a,b", o, [launched](Rank& r) {
    using Count = unsigned long long (*)();
    auto enqueued = reinterpret_cast<Count>(runtimeFunction("emu", "ThreadEnqueued"));
    ASSERT_NE(enqueued, nullptr) << "no emuThreadEnqueued in the emu runtime";
    const size_t count = size_t{1} << 20;
    DeviceBuffer b(r, count * 4);
    b.upload(std::vector<int32_t>(count, r.rank + 1).data(), count * 4);
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    syncStream(r);  // the first call's set-up is behind
    const unsigned long long before = enqueued();
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    const unsigned long long ops = enqueued() - before;
    if (launched)
      EXPECT_LE(ops, 4u) << "stream operations the calling thread enqueued for a launched call";
    else
      EXPECT_GE(ops, 64u) << "stream operations the calling thread enqueued for a call it enqueued itself";
    syncStream(r);
    EXPECT_EQ(readBack(b, count), std::vector<int32_t>(count, 2 * 3));  // (1 + 2) twice
  });
}

TEST(EmuOverlap, ALargeCallCostsTheCallingThreadAFewStreamOperations) {
  countEnqueued("65536", true);
  countEnqueued("1G", false);
}

}  // namespace
}  // namespace hmp
