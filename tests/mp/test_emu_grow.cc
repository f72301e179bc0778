// hetcclCommGrow with emulated GPU ranks: host ranks grow by GPU ranks of a
// group of their own (the device border's staged path appears), and GPU
// ranks grow by GPU ranks; every collective is right on the grown
// communicator, with device buffers and streams.
#include <gtest/gtest.h>

#include <algorithm>

#include "emu_util.h"
#include "grow_util.h"

namespace hmp {
namespace {

struct EmuGrowCase {
  const char* name;
  const char* layout;
  const char* devices;
};

// AllReduce, AllGather, ReduceScatter and a Broadcast from a new rank on
// device buffers and the rank's stream.
void checkOnDevice(const Rank& v) {
  const int n = v.nranks, me = v.rank;
  hetcclCommInfo_t info = infoOf(v);
  EXPECT_EQ(info.ngroups, 2);
  const std::vector<std::string> groups = v.groupNames();
  EXPECT_EQ(info.myGroup, std::find(groups.begin(), groups.end(), v.layout[me]) - groups.begin());
  EXPECT_STREQ(info.deviceKind, v.device.c_str()) << "a new rank's device is its own";
  const size_t count = (size_t{1} << 16) + 5;
  DeviceBuffer arIn(v, count * 4), arOut(v, count * 4), agIn(v, 500 * 4), agOut(v, 500 * 4 * n), bc(v, count * 4),
      rsIn(v, 333 * 4 * n), rsOut(v, 333 * 4);
  std::vector<int32_t> weighted = iota(count, 0, me + 1);
  arIn.upload(weighted.data(), count * 4);
  std::vector<int32_t> ag = iota(500, me * 100000, 1);
  agIn.upload(ag.data(), ag.size() * 4);
  std::vector<int32_t> bcData = me == n - 1 ? iota(count, 7, 3) : std::vector<int32_t>(count, -1);
  bc.upload(bcData.data(), count * 4);
  std::vector<int32_t> rs = iota(333 * n, 0, me + 1);
  rsIn.upload(rs.data(), rs.size() * 4);
  v.progress("collectives on the grown communicator");
  HC_ASSERT_OK(hetcclAllReduce(arIn.get(), arOut.get(), count, hetcclInt32, hetcclSum, v.comm, v.stream), v.comm);
  HC_ASSERT_OK(hetcclAllGather(agIn.get(), agOut.get(), 500, hetcclInt32, v.comm, v.stream), v.comm);
  HC_ASSERT_OK(hetcclBroadcast(bc.get(), bc.get(), count, hetcclInt32, n - 1, v.comm, v.stream), v.comm);
  HC_ASSERT_OK(hetcclReduceScatter(rsIn.get(), rsOut.get(), 333, hetcclInt32, hetcclSum, v.comm, v.stream), v.comm);
  syncStream(v);
  const int32_t weights = n * (n + 1) / 2;
  EXPECT_EQ(readBack(arOut, count), iota(count, 0, weights)) << "AllReduce";
  std::vector<int32_t> agWant;
  for (int p = 0; p < n; ++p) {
    std::vector<int32_t> part = iota(500, p * 100000, 1);
    agWant.insert(agWant.end(), part.begin(), part.end());
  }
  EXPECT_EQ(readBack(agOut, 500 * n), agWant) << "AllGather";
  EXPECT_EQ(readBack(bc, count), iota(count, 7, 3)) << "Broadcast from new rank " << n - 1;
  EXPECT_EQ(readBack(rsOut, 333), iota(333, 333 * me * weights, weights)) << "ReduceScatter";
}

class EmuGrow : public ::testing::TestWithParam<EmuGrowCase> {};

TEST_P(EmuGrow, RunningRanksGrowByGpuRanksAndEveryCollectiveIsRight) {
  JobOptions opt;
  opt.devices = parseDevices(GetParam().devices);
  runJob(GetParam().layout, opt, [](Rank& r) { growTwoToFour(r, checkOnDevice); });
}

INSTANTIATE_TEST_SUITE_P(Emu, EmuGrow,
                         ::testing::Values(EmuGrowCase{"host_pair_grows_by_emu_group", "a,a,b,b", "host,host,emu,emu"},
                                           EmuGrowCase{"emu_pair_grows_by_emu", "a,b,a,b", "emu,emu,emu,emu"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace hmp
