// A GPU rank's calls across groups run beside the rank's other streams:
// while a host function holds another stream of the rank (the
// application's compute), every collective and send/recv across groups on
// the rank's stream completes; none waits for a stream it was not given
// (the gate names one that did).
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

// Every call on the device border (64 KiB parts), groups of one (on the
// test GPU kind: scripts/gpu-check.sh faults runs it on CUDA) and groups of
// two, whose group steps run on the caller's stream too; and the border
// from 100 KB on, the smaller calls staged (the proxy's work).
const OverlapCase kOverlapCases[] = {
    {"ab", "a,b", nullptr, {{"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
    {"ab_staged_then_border",
     "a,b",
     nullptr,
     {{"HETCCL_GPU_BORDER_MIN", "100000"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
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

}  // namespace
}  // namespace hmp
