// GPU ranks' calls return while their stream is held: a host function
// enqueued first blocks each GPU rank's stream until the rank has made all
// its calls, so a call that waited for the device (or for the proxy, which
// waits for the device) would return only when the gate gives up, and the
// test names it. Then the gates open and every result is checked.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

struct NoWaitCase {
  const char* name;
  const char* layout;
  const char* devices;  // nullptr: the test GPU kind (HETCCL_TEST_GPU, else emu) for every rank
  std::vector<std::pair<std::string, std::string>> env;
};

void PrintTo(const NoWaitCase& c, std::ostream* os) { *os << c.name; }

// The device border on every call (64 KiB parts); the border from 100 KB
// on, so that the small AllReduce stages and the border's group steps of
// the next calls (groups of two) come while it is queued on the proxy; and
// a GPU group of two next to a group of host ranks: every call staged,
// then send/recv inside the GPU group while the staged calls are queued.
// In the last two the vendor library's calls go through the proxy, after
// the staged calls (gpu/vendor_calls.h).
const NoWaitCase kNoWaitCases[] = {
    {"aabb_border",
     "a,a,b,b",
     "emu,emu,emu,emu",
     {{"HETCCL_GPU_BORDER", "1"}, {"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
    {"aabb_staged_then_border",
     "a,a,b,b",
     "emu,emu,emu,emu",
     {{"HETCCL_GPU_BORDER", "1"}, {"HETCCL_GPU_BORDER_MIN", "100000"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
    {"aa_emu_bb_host", "a,a,b,b", "emu,emu,host,host", {}},
    // Groups of one on the test GPU kind (scripts/gpu-check.sh faults runs
    // it on CUDA): the border from 100 KB on, staged below.
    {"ab_staged_then_border",
     "a,b",
     nullptr,
     {{"HETCCL_GPU_BORDER", "1"}, {"HETCCL_GPU_BORDER_MIN", "100000"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}}},
};

class EmuNoWait : public ::testing::TestWithParam<NoWaitCase> {};

// An AllReduce of each size class (one part, many parts), an AllGather,
// then a ring of send/recv (inside the group and across it), all on a held
// stream; a host rank's calls run on its thread, as always.
TEST_P(EmuNoWait, CallsReturnWhileTheirStreamIsHeld) {
  JobOptions o;
  const char* devices = GetParam().devices;
  o.devices = devices ? parseDevices(devices) : std::vector<std::string>{testGpuKind(), testGpuKind()};
  o.env = GetParam().env;
  runJob(GetParam().layout, o, [](Rank& r) {
    const int n = r.nranks, me = r.rank;
    const size_t small = 1000, large = 70000, blk = 3000;
    DeviceBuffer a(r, small * 4), b(r, large * 4), agIn(r, blk * 4), agOut(r, blk * 4 * n), out(r, blk * 4),
        in(r, blk * 4), pIn(r, blk * 4);
    a.upload(std::vector<int32_t>(small, me + 1).data(), small * 4);
    b.upload(std::vector<int32_t>(large, me + 1).data(), large * 4);
    agIn.upload(iota(blk, me * 10000, 1).data(), blk * 4);
    out.upload(iota(blk, me * 10000, 7).data(), blk * 4);
    syncStream(r);
    const bool gpu = r.device != "host";
    std::unique_ptr<StreamGate> gate;
    if (gpu) {
      gate = std::make_unique<StreamGate>(r, r.stream);
      ASSERT_TRUE(gate->armed());
    }
    r.progress("calls on a held stream");
    HC_ASSERT_OK(hetcclAllReduce(a.get(), a.get(), small, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), large, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclAllGather(agIn.get(), agOut.get(), blk, hetcclInt32, r.comm, r.stream), r.comm);
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclSend(out.get(), blk, hetcclInt32, next, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclRecv(in.get(), blk, hetcclInt32, prev, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), nullptr);
    // Partners me ^ 1: inside group a or b in the four-rank layouts, a
    // send/recv that takes the vendor library after the staged calls;
    // across the groups in a,b.
    const int partner = me ^ 1;
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclSend(agIn.get(), blk, hetcclInt32, partner, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclRecv(pIn.get(), blk, hetcclInt32, partner, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), nullptr);
    if (gpu) {
      EXPECT_FALSE(gate->expired()) << "a call waited for its held stream (" << StreamGate::kHoldS << " s)";
      gate->open();
    }
    syncStream(r);
    const int32_t sum = n * (n + 1) / 2;
    EXPECT_EQ(readBack(a, small), std::vector<int32_t>(small, sum));
    EXPECT_EQ(readBack(b, large), std::vector<int32_t>(large, sum));
    std::vector<int32_t> want;
    for (int q = 0; q < n; ++q) {
      std::vector<int32_t> part = iota(blk, q * 10000, 1);
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_EQ(readBack(agOut, blk * n), want);
    EXPECT_EQ(readBack(in, blk), iota(blk, prev * 10000, 7));
    EXPECT_EQ(readBack(pIn, blk), iota(blk, partner * 10000, 1));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuNoWait, ::testing::ValuesIn(kNoWaitCases),
                         [](const ::testing::TestParamInfo<NoWaitCase>& i) { return std::string(i.param.name); });

// One group call over two communicators of the same ranks: a communicator
// of one group (its calls go to the vendor library, which holds them until
// the group's end, as NCCL's thread-wide group does) and the world of two
// groups of two (the device border, whose group steps are vendor calls from
// this thread too: held the same way, they would run after the border steps
// that read their output). Both results are checked.
TEST(EmuGroupOfComms, AOneGroupAndATwoGroupCommunicatorInOneGroupCall) {
  JobOptions o;
  o.devices = parseDevices("emu,emu,emu,emu");
  o.env = {{"HETCCL_GPU_BORDER", "1"}, {"HETCCL_GPU_BORDER_MIN", "0"}, {"HETCCL_GPU_BORDER_CHUNK", "65536"}};
  runJob("a,a,b,b", o, [](Rank& r) {
    const int me = r.rank, n = r.nranks;
    hetcclComm_t mine = nullptr;  // ranks 0,1 (group a) and 2,3 (group b)
    HC_ASSERT_OK(hetcclCommSplit(r.comm, me / 2, me, &mine, nullptr), r.comm);
    ASSERT_NE(mine, nullptr);
    const size_t count = 70000;  // several parts across the border
    DeviceBuffer x(r, count * 4), y(r, count * 4);
    for (int round = 0; round < 3; ++round) {
      x.upload(std::vector<int32_t>(count, me + 1).data(), count * 4);
      y.upload(iota(count, me * 1000, 1).data(), count * 4);
      HC_ASSERT_OK(hetcclGroupStart(), nullptr);
      HC_ASSERT_OK(hetcclAllReduce(x.get(), x.get(), count, hetcclInt32, hetcclSum, mine, r.stream), mine);
      HC_ASSERT_OK(hetcclAllReduce(y.get(), y.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclGroupEnd(), nullptr);
      syncStream(r);
      const int base = me / 2 * 2;  // my pair: base + 1 and base + 2
      EXPECT_EQ(readBack(x, count), std::vector<int32_t>(count, 2 * base + 3)) << "round " << round;
      std::vector<int32_t> want(count, 0);
      for (int q = 0; q < n; ++q) {
        const std::vector<int32_t> part = iota(count, q * 1000, 1);
        for (size_t i = 0; i < count; ++i) want[i] += part[i];
      }
      EXPECT_EQ(readBack(y, count), want) << "round " << round;
    }
    EXPECT_EQ(hetcclCommDestroy(mine), hetcclSuccess);
  });
}

}  // namespace
}  // namespace hmp
