// Ranks on emulated GPUs in groups of different sizes (device kind emu):
// every collective through the device border, as test_emu.cc's
// EmuBorderCalls for groups of one size.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

// Groups of different sizes: AllReduce through the device border (shares
// of the smallest group's size; the larger groups' other ranks in the group
// steps only), at counts below, at and around the number of shares, in and
// out of place, int32 sum and float Avg; Broadcast and Reduce from and to
// every root; AllGather and ReduceScatter in and out of place; Gather and
// Scatter to and from every root; AlltoAll in and out of place: each right
// and counted as taking the border.
class EmuBorderUnequal : public ::testing::TestWithParam<const char*> {};

TEST_P(EmuBorderUnequal, EveryCollectiveTakesTheBorder) {
  JobOptions o;
  const std::string layout = GetParam();
  std::string devices;
  for (size_t i = 0; i < layout.size(); i += 2) devices += std::string(devices.empty() ? "" : ",") + "emu";
  o.devices = parseDevices(devices);
  borderEnv(o, true);
  runJob(GetParam(), o, [](Rank& r) {
    const int n = r.nranks, me = r.rank;
    int allReduces = 0;
    for (size_t count : {size_t{1}, size_t{2}, size_t{5}, size_t{70001}, size_t{300007}}) {
      r.progress("AllReduce of " + std::to_string(count));
      std::vector<int32_t> in = iota(count, me * 7, me + 1), want(count, 0);
      for (int q = 0; q < n; ++q) {
        std::vector<int32_t> v = iota(count, q * 7, q + 1);
        for (size_t j = 0; j < count; ++j) want[j] += v[j];
      }
      DeviceBuffer a(r, count * 4), b(r, count * 4), f(r, count * 4);
      a.upload(in.data(), count * 4);
      std::vector<float> fin(count), fwant(count);
      for (size_t j = 0; j < count; ++j) fin[j] = static_cast<float>(n * ((j % 5) + 1));
      for (size_t j = 0; j < count; ++j)
        fwant[j] = static_cast<float>(n * ((j % 5) + 1));  // the average of equal values
      f.upload(fin.data(), count * 4);
      HC_ASSERT_OK(hetcclAllReduce(a.get(), b.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclAllReduce(a.get(), a.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclAllReduce(f.get(), f.get(), count, hetcclFloat32, hetcclAvg, r.comm, r.stream), r.comm);
      allReduces += 3;
      syncStream(r);
      EXPECT_EQ(readBack(b, count), want) << "out of place, count " << count;
      EXPECT_EQ(readBack(a, count), want) << "in place, count " << count;
      EXPECT_EQ(readFloats(f, count), fwant) << "float Avg, count " << count;
    }
    // Broadcast from every root, in and out of place (and Reduce below,
    // counted with them): roots of an index the
    // smallest group lacks first broadcast in their group, whose rank 0
    // carries the buffer across.
    int rooted = 0;  // Broadcasts and Reduces
    for (int root = 0; root < n; ++root) {
      r.progress("Broadcast from " + std::to_string(root));
      const size_t count = 70001;
      const std::vector<int32_t> want = iota(count, root * 1000, root + 3);
      DeviceBuffer src(r, count * 4), dst(r, count * 4), both(r, count * 4);
      std::vector<int32_t> junk(count, -1);
      dst.upload(junk.data(), count * 4);
      both.upload(me == root ? want.data() : junk.data(), count * 4);
      if (me == root) src.upload(want.data(), count * 4);
      HC_ASSERT_OK(hetcclBroadcast(src.get(), dst.get(), count, hetcclInt32, root, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclBroadcast(both.get(), both.get(), count, hetcclInt32, root, r.comm, r.stream), r.comm);
      rooted += 2;
      syncStream(r);
      EXPECT_EQ(readBack(dst, count), want) << "Broadcast from " << root << ", out of place";
      EXPECT_EQ(readBack(both, count), want) << "Broadcast from " << root << ", in place";
    }
    // Reduce to every root, out of place and in place at the root: roots of
    // such an index get the result from their group's rank 0.
    for (int root = 0; root < n; ++root) {
      r.progress("Reduce to " + std::to_string(root));
      const size_t count = 70001;
      std::vector<int32_t> want(count, 0);
      for (int q = 0; q < n; ++q) {
        std::vector<int32_t> v = iota(count, q * 11 + root, q + 2);
        for (size_t j = 0; j < count; ++j) want[j] += v[j];
      }
      DeviceBuffer src(r, count * 4), dst(r, count * 4), both(r, count * 4);
      src.upload(iota(count, me * 11 + root, me + 2).data(), count * 4);
      both.upload(iota(count, me * 11 + root, me + 2).data(), count * 4);
      HC_ASSERT_OK(hetcclReduce(src.get(), dst.get(), count, hetcclInt32, hetcclSum, root, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclReduce(both.get(), both.get(), count, hetcclInt32, hetcclSum, root, r.comm, r.stream), r.comm);
      rooted += 2;
      syncStream(r);
      if (me == root) {
        EXPECT_EQ(readBack(dst, count), want) << "Reduce to " << root << ", out of place";
        EXPECT_EQ(readBack(both, count), want) << "Reduce to " << root << ", in place";
      }
    }
    // AllGather, out of place and in place (counted with ReduceScatter below):
    // lanes of index mod the smallest
    // group's size (counts of 20000 and 70001 elements: one piece and more).
    int gathers = 0;
    for (size_t m : {size_t{20000}, size_t{70001}}) {
      r.progress("AllGather of " + std::to_string(m));
      DeviceBuffer gin(r, m * 4), gout(r, m * 4 * n), gboth(r, m * 4 * n);
      gin.upload(iota(m, me * 100000, 1).data(), m * 4);
      std::vector<int32_t> gwant, start(m * n, -1);
      for (int q = 0; q < n; ++q) {
        std::vector<int32_t> part = iota(m, q * 100000, 1);
        gwant.insert(gwant.end(), part.begin(), part.end());
        if (q == me) std::copy(part.begin(), part.end(), start.begin() + q * m);
      }
      gboth.upload(start.data(), m * 4 * n);
      HC_ASSERT_OK(hetcclAllGather(gin.get(), gout.get(), m, hetcclInt32, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(
          hetcclAllGather(static_cast<int32_t*>(gboth.get()) + me * m, gboth.get(), m, hetcclInt32, r.comm, r.stream),
          r.comm);
      gathers += 2;
      syncStream(r);
      EXPECT_EQ(readBack(gout, m * n), gwant) << "AllGather of " << m << ", out of place";
      EXPECT_EQ(readBack(gboth, m * n), gwant) << "AllGather of " << m << ", in place";
    }
    // ReduceScatter, out of place and in place (int32 sum): lanes again.
    for (size_t m : {size_t{20000}, size_t{70001}}) {
      r.progress("ReduceScatter of " + std::to_string(m));
      DeviceBuffer rin(r, m * 4 * n), rout(r, m * 4), rboth(r, m * 4 * n);
      rin.upload(iota(m * n, me, 1).data(), m * 4 * n);
      rboth.upload(iota(m * n, me, 1).data(), m * 4 * n);
      HC_ASSERT_OK(hetcclReduceScatter(rin.get(), rout.get(), m, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclReduceScatter(rboth.get(), static_cast<int32_t*>(rboth.get()) + me * m, m, hetcclInt32,
                                       hetcclSum, r.comm, r.stream),
                   r.comm);
      gathers += 2;
      syncStream(r);
      std::vector<int32_t> rwant(m, 0);
      for (int q = 0; q < n; ++q) {
        std::vector<int32_t> all = iota(m * n, q, 1);
        for (size_t j = 0; j < m; ++j) rwant[j] += all[me * m + j];
      }
      EXPECT_EQ(readBack(rout, m), rwant) << "ReduceScatter of " << m << ", out of place";
      std::vector<int32_t> both = readBack(rboth, m * n);
      EXPECT_EQ(std::vector<int32_t>(both.begin() + me * m, both.begin() + (me + 1) * m), rwant)
          << "ReduceScatter of " << m << ", in place";
    }
    // ReduceScatter with a PreMulSum (x 0.5, out of place: every partial sum
    // exact) and float Avg (in place: equal values on every rank).
    for (size_t m : {size_t{1}, size_t{70001}}) {
      r.progress("PreMulSum and Avg ReduceScatter of " + std::to_string(m));
      std::vector<float> pin(m * n), ain(m * n), pwant(m), awant(m);
      for (size_t x = 0; x < m * n; ++x) {
        pin[x] = static_cast<float>((me + 1) * static_cast<int>(x % 7 + 1));
        ain[x] = static_cast<float>(n * static_cast<int>(x % 5 + 1));
      }
      for (size_t j = 0; j < m; ++j) {
        const size_t x = me * m + j;
        pwant[j] = 0.5f * static_cast<float>(n * (n + 1) / 2 * static_cast<int>(x % 7 + 1));
        awant[j] = ain[x];
      }
      DeviceBuffer pdev(r, m * 4 * n), pout(r, m * 4), adev(r, m * 4 * n);
      pdev.upload(pin.data(), m * 4 * n);
      adev.upload(ain.data(), m * 4 * n);
      float half = 0.5f;
      hetcclRedOp_t op;
      HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&op, &half, hetcclFloat32, hetcclScalarHostImmediate, r.comm), r.comm);
      HC_ASSERT_OK(hetcclReduceScatter(pdev.get(), pout.get(), m, hetcclFloat32, op, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclReduceScatter(adev.get(), static_cast<float*>(adev.get()) + me * m, m, hetcclFloat32,
                                       hetcclAvg, r.comm, r.stream),
                   r.comm);
      gathers += 2;
      syncStream(r);
      HC_EXPECT_OK(hetcclRedOpDestroy(op, r.comm), r.comm);
      EXPECT_EQ(readFloats(pout, m), pwant) << "PreMulSum ReduceScatter of " << m;
      std::vector<float> got = readFloats(adev, m * n);
      for (size_t j = 0; j < m; ++j)  // 1/n is rounded: near, not equal
        ASSERT_NEAR(got[me * m + j], awant[j], 1e-5 * awant[j]) << "Avg ReduceScatter of " << m << ", element " << j;
    }
    // Gather to and Scatter from every root, in and out of place: one lane
    // carries (the root's, or 0 whose rank hands over to a root of an index
    // the smallest group lacks); one element and several pieces.
    for (size_t m : {size_t{1}, size_t{70001}})
      for (int root = 0; root < n; ++root) {
        r.progress("Gather to and Scatter from " + std::to_string(root) + ", " + std::to_string(m));
        std::vector<int32_t> all;  // the gathered buffer, the scattered one
        for (int q = 0; q < n; ++q) {
          std::vector<int32_t> part = iota(m, q * 100000 + root, q + 1);
          all.insert(all.end(), part.begin(), part.end());
        }
        const std::vector<int32_t> mine(all.begin() + me * m, all.begin() + (me + 1) * m);
        std::vector<int32_t> start(m * n, -1);
        std::copy(mine.begin(), mine.end(), start.begin() + me * m);
        DeviceBuffer gin(r, m * 4), gout(r, m * 4 * n), gboth(r, m * 4 * n);
        gin.upload(mine.data(), m * 4);
        gboth.upload(start.data(), m * 4 * n);
        HC_ASSERT_OK(hetcclGather(gin.get(), gout.get(), m, hetcclInt32, root, r.comm, r.stream), r.comm);
        int32_t* inPlace = static_cast<int32_t*>(gboth.get()) + me * m;
        HC_ASSERT_OK(hetcclGather(inPlace, gboth.get(), m, hetcclInt32, root, r.comm, r.stream), r.comm);
        DeviceBuffer sin(r, m * 4 * n), sout(r, m * 4), sboth(r, m * 4 * n);
        std::vector<int32_t> junk(m * n, -1);
        sin.upload(me == root ? all.data() : junk.data(), m * 4 * n);
        sboth.upload(me == root ? all.data() : junk.data(), m * 4 * n);
        HC_ASSERT_OK(hetcclScatter(sin.get(), sout.get(), m, hetcclInt32, root, r.comm, r.stream), r.comm);
        HC_ASSERT_OK(hetcclScatter(sboth.get(), static_cast<int32_t*>(sboth.get()) + me * m, m, hetcclInt32, root,
                                   r.comm, r.stream),
                     r.comm);
        rooted += 4;
        syncStream(r);
        if (me == root) {
          EXPECT_EQ(readBack(gout, m * n), all) << "Gather to " << root << " of " << m << ", out of place";
          EXPECT_EQ(readBack(gboth, m * n), all) << "Gather to " << root << " of " << m << ", in place";
        }
        EXPECT_EQ(readBack(sout, m), mine) << "Scatter from " << root << " of " << m << ", out of place";
        std::vector<int32_t> got = readBack(sboth, m * n);
        EXPECT_EQ(std::vector<int32_t>(got.begin() + me * m, got.begin() + (me + 1) * m), mine)
            << "Scatter from " << root << " of " << m << ", in place";
      }
    // AlltoAll out of place and in place (lanes again; in place, the
    // group's own blocks through a part of scratch): one element, one piece
    // and several.
    for (size_t m : {size_t{1}, size_t{1000}, size_t{30001}}) {
      r.progress("AlltoAll of " + std::to_string(m));
      DeviceBuffer ain(r, m * 4 * n), aout(r, m * 4 * n), aboth(r, m * 4 * n);
      ain.upload(iota(m * n, me * 100000, 1).data(), m * 4 * n);
      aboth.upload(iota(m * n, me * 100000, 1).data(), m * 4 * n);
      HC_ASSERT_OK(hetcclAlltoAll(ain.get(), aout.get(), m, hetcclInt32, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclAlltoAll(aboth.get(), aboth.get(), m, hetcclInt32, r.comm, r.stream), r.comm);
      gathers += 2;
      syncStream(r);
      std::vector<int32_t> awant;
      for (int q = 0; q < n; ++q) {
        std::vector<int32_t> all = iota(m * n, q * 100000, 1);
        awant.insert(awant.end(), all.begin() + me * m, all.begin() + (me + 1) * m);
      }
      EXPECT_EQ(readBack(aout, m * n), awant) << "AlltoAll of " << m << ", out of place";
      EXPECT_EQ(readBack(aboth, m * n), awant) << "AlltoAll of " << m << ", in place";
    }
    hetcclCommInfo_t info{};
    info.size = sizeof(info);
    HC_ASSERT_OK(hetcclCommGetInfo(r.comm, &info), r.comm);
    EXPECT_STREQ(info.borderPath, "device");
    EXPECT_EQ(info.pathCalls[hetcclPathDevice], static_cast<unsigned long long>(allReduces + rooted + gathers));
    EXPECT_EQ(info.pathCalls[hetcclPathStaged], 0ull);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuBorderUnequal, ::testing::Values("a,a,b", "a,a,a,b,b", "a,b,b,c,c,c"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string s = i.param;
                           s.erase(std::remove(s.begin(), s.end(), ','), s.end());
                           return s;
                         });

}  // namespace
}  // namespace hmp
