// Ranks on emulated GPUs (device kind emu: libhetccl-emu.so, groups run by
// libhetccl-emu-nccl.so): group calls and failures as GPU ranks meet them,
// with device buffers and stream-ordered calls. Every collective x type x op
// on these layouts is gpu_matrix's (tests/gpu, ctest emu.matrix_*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

struct EmuCase {
  const char* name;
  const char* layout;
  const char* devices;
  const char* transport;
  std::vector<std::pair<std::string, std::string>> env;
};

void PrintTo(const EmuCase& c, std::ostream* os) { *os << c.name; }

// 2+2 over shm and tcp, 3+1, 1+1+2 in chunks, interleaved, 8 ranks in 3
// groups, an emu group next to a host group.
const EmuCase kCases[] = {
    {"aabb_shm_staged", "a,a,b,b", "emu,emu,emu,emu", "shm", {}},
    {"aabb_tcp", "a,a,b,b", "emu,emu,emu,emu", "tcp", {}},
    {"aaab_shm", "a,a,a,b", "emu,emu,emu,emu", "shm", {}},
    {"abcc_shm_chunked", "a,b,c,c", "emu,emu,emu,emu", "shm", {{"HETCCL_CHUNK_BYTES", "64K"}}},
    {"abab_tcp", "a,b,a,b", "emu,emu,emu,emu", "tcp", {}},
    {"aaabbccc_shm", "a,a,a,b,b,c,c,c", "emu,emu,emu,emu,emu,emu,emu,emu", "shm", {}},
    {"emu_next_to_host_shm", "a,a,b,b", "emu,emu,host,host", "shm", {}},
    // Staged, cut by border bandwidth (rates by rank: uneven shards through
    // the vendor library's grouped Reduce and Broadcast calls).
    {"aabb_shm_staged_bwcut", "a,a,b,b", "emu,emu,emu,emu", "shm_bwcut", {{"HETCCL_GPU_BORDER", "0"}}},
};

// With the device border from 1 MiB on (as where two ranks share one GPU),
// so that smaller calls take the staged path these layouts are for; the
// border's own tests set their sizes.
JobOptions options(const EmuCase& c) {
  JobOptions o;
  o.transport = c.transport;
  o.devices = parseDevices(c.devices);
  o.env = c.env;
  o.env.emplace_back("HETCCL_GPU_BORDER_MIN", "1M");
  return o;
}

class Emu : public ::testing::TestWithParam<EmuCase> {};

// One group call of four collectives on device buffers (large enough for
// the chunked path and the border), then one of point-to-point calls in both
// ring directions and to self, posted receives first; all stream-ordered.
TEST_P(Emu, GroupCallsOnDeviceBuffersGiveEveryResult) {
  runJob(GetParam().layout, options(GetParam()), [](Rank& r) {
    const int n = r.nranks, me = r.rank;
    const size_t count = (size_t{1} << 18) + 3;  // 1 MiB and a bit of int32
    const int32_t sumOfWeights = n * (n + 1) / 2;
    DeviceBuffer arIn(r, count * 4), arOut(r, count * 4), agIn(r, 1000 * 4), agOut(r, 1000 * 4 * n), bc(r, count * 4),
        rsIn(r, 777 * 4 * n), rsOut(r, 777 * 4);
    std::vector<int32_t> ones = iota(count, 0, 1);
    for (auto& x : ones) x *= me + 1;  // rank-weighted
    arIn.upload(ones.data(), count * 4);
    std::vector<int32_t> ag = iota(1000, me * 100000, 1);
    agIn.upload(ag.data(), ag.size() * 4);
    std::vector<int32_t> bcData = me == n - 1 ? iota(count, 7, 3) : std::vector<int32_t>(count, -1);
    bc.upload(bcData.data(), count * 4);
    std::vector<int32_t> rs = iota(777 * n, 0, 1);
    for (auto& x : rs) x *= me + 1;
    rsIn.upload(rs.data(), rs.size() * 4);

    r.progress("group of AllReduce, AllGather, Broadcast, ReduceScatter");
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclAllReduce(arIn.get(), arOut.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);  // nested
    HC_ASSERT_OK(hetcclAllGather(agIn.get(), agOut.get(), 1000, hetcclInt32, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclBroadcast(bc.get(), bc.get(), count, hetcclInt32, n - 1, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    HC_ASSERT_OK(hetcclReduceScatter(rsIn.get(), rsOut.get(), 777, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    syncStream(r);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);

    std::vector<int32_t> want = iota(count, 0, sumOfWeights);
    EXPECT_EQ(readBack(arOut, count), want) << "AllReduce";
    std::vector<int32_t> agWant;
    for (int p = 0; p < n; ++p) {
      std::vector<int32_t> part = iota(1000, p * 100000, 1);
      agWant.insert(agWant.end(), part.begin(), part.end());
    }
    EXPECT_EQ(readBack(agOut, agWant.size()), agWant) << "AllGather";
    EXPECT_EQ(readBack(bc, count), iota(count, 7, 3)) << "Broadcast from rank " << n - 1;
    std::vector<int32_t> rsWant(777);
    for (size_t i = 0; i < 777; ++i) rsWant[i] = sumOfWeights * static_cast<int32_t>((me * 777 + i) % 4093);
    EXPECT_EQ(readBack(rsOut, 777), rsWant) << "ReduceScatter";

    r.progress("group of sends and receives: both ring directions and self");
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    const size_t m = 5000;
    DeviceBuffer toNext(r, m * 4), toPrev(r, m * 4), toSelf(r, m * 4), fromPrev(r, m * 4), fromNext(r, m * 4),
        fromSelf(r, m * 4);
    toNext.upload(iota(m, me * 1000 + 1, 1).data(), m * 4);
    toPrev.upload(iota(m, me * 1000 + 2, 1).data(), m * 4);
    toSelf.upload(iota(m, me * 1000 + 3, 1).data(), m * 4);
    hetcclCommInfo_t before = infoOf(r);
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclRecv(fromPrev.get(), m, hetcclInt32, prev, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclRecv(fromNext.get(), m, hetcclInt32, next, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclRecv(fromSelf.get(), m, hetcclInt32, me, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclSend(toNext.get(), m, hetcclInt32, next, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclSend(toPrev.get(), m, hetcclInt32, prev, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclSend(toSelf.get(), m, hetcclInt32, me, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    syncStream(r);
    EXPECT_EQ(readBack(fromPrev, m), iota(m, prev * 1000 + 1, 1)) << "from rank " << prev;
    EXPECT_EQ(readBack(fromNext, m), iota(m, next * 1000 + 2, 1)) << "from rank " << next;
    EXPECT_EQ(readBack(fromSelf, m), iota(m, me * 1000 + 3, 1)) << "from self";
    // A GPU rank hands the pairs inside its group (self included: both
    // sides are in this group) to the vendor library alone.
    if (r.device != "host") {
      unsigned long long inGroup = 2;
      for (int peer : {prev, next})
        if (r.layout[peer] == r.group) inGroup += 2;
      EXPECT_EQ(infoOf(r).pathCalls[hetcclPathNone] - before.pathCalls[hetcclPathNone], inGroup)
          << "send/recv inside group " << r.group << " not through the vendor library";
    }
  });
}

// Several calls enqueued back to back, each reading the previous one's
// output, with the stream slower than the host (every operation starts
// late, copies slower still): only stream order makes the results right.
TEST_P(Emu, BackToBackCallsKeepStreamOrderOnASlowDevice) {
  JobOptions o = options(GetParam());
  o.env.emplace_back("HETCCL_EMU_STALL_US", "200");
  o.env.emplace_back("HETCCL_EMU_COPY_DELAY_US", "500");
  runJob(GetParam().layout, o, [](Rank& r) {
    const size_t count = 70000;
    DeviceBuffer buf(r, count * 4);
    std::vector<int32_t> one(count, 1);
    buf.upload(one.data(), count * 4);
    for (int k = 0; k < 3; ++k)  // in place: 1 -> n -> n^2 -> n^3
      HC_ASSERT_OK(hetcclAllReduce(buf.get(), buf.get(), count, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
    syncStream(r);
    const int32_t n = r.nranks;
    EXPECT_EQ(readBack(buf, count), std::vector<int32_t>(count, n * n * n));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Emu, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<EmuCase>& i) { return std::string(i.param.name); });

// Send/recv between the two groups' ranks through the device border's pair
// channels (64 KiB parts, 4 slots), as torch issues them: separate calls
// in opposite orders on the two ranks, many parts; both ranks sending
// first (fits in the slots, as a small NCCL send does); one group of both
// directions, many parts.
TEST(EmuBorder, SendRecvThroughThePairChannels) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, true);
  runJob("a,b", o, [](Rank& r) {
    const int peer = 1 - r.rank;
    const size_t big = (size_t{1} << 18) + 5, small = 3 * 16384;  // 17 parts; 3 parts
    DeviceBuffer out(r, big * 4), in(r, big * 4);
    std::vector<int32_t> mine = iota(big, r.rank * 100000, 3), want = iota(big, peer * 100000, 3);
    std::vector<int32_t> junk(big, -1);
    out.upload(mine.data(), big * 4);
    auto send = [&](size_t n) { return hetcclSend(out.get(), n, hetcclInt32, peer, r.comm, r.stream); };
    auto recv = [&](size_t n) { return hetcclRecv(in.get(), n, hetcclInt32, peer, r.comm, r.stream); };

    in.upload(junk.data(), big * 4);
    if (r.rank == 0) {
      HC_ASSERT_OK(send(big), r.comm);
      HC_ASSERT_OK(recv(big), r.comm);
    } else {
      HC_ASSERT_OK(recv(big), r.comm);
      HC_ASSERT_OK(send(big), r.comm);
    }
    syncStream(r);
    EXPECT_EQ(readBack(in, big), want) << "separate calls in opposite orders";

    in.upload(junk.data(), big * 4);
    HC_ASSERT_OK(send(small), r.comm);
    HC_ASSERT_OK(recv(small), r.comm);
    syncStream(r);
    std::vector<int32_t> got = readBack(in, big);
    EXPECT_TRUE(std::equal(want.begin(), want.begin() + small, got.begin())) << "both ranks sending first";
    EXPECT_EQ(got[small], -1) << "written past the message";

    in.upload(junk.data(), big * 4);
    HC_ASSERT_OK(hetcclGroupStart(), r.comm);
    HC_ASSERT_OK(send(big), r.comm);
    HC_ASSERT_OK(recv(big), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    syncStream(r);
    EXPECT_EQ(readBack(in, big), want) << "one group of both directions";
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    EXPECT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
  });
}

// The calls that used to stage, now on the device border, checked against
// values computed here (small integers and power-of-two scalars: every
// float result is exact): ReduceScatter in place with float Avg and out of
// place with a PreMulSum, Reduce with a PreMulSum (in place at the root),
// AlltoAll in place, and one group call of three collectives. Every call is
// counted on the device path (hetcclCommInfo_t.pathCalls), none staged.
class EmuBorderCalls : public ::testing::TestWithParam<const char*> {};

TEST_P(EmuBorderCalls, InPlacePreMulSumAndGroupsTakeTheBorder) {
  JobOptions o;
  o.devices = std::string(GetParam()) == "a,b" ? std::vector<std::string>{testGpuKind(), testGpuKind()}
                                               : parseDevices("emu,emu,emu,emu");
  borderEnv(o, true);
  runJob(GetParam(), o, [](Rank& r) {
    const int n = r.nranks, me = r.rank;
    const size_t blk = 3 * 16384 + 5;  // several 64 KiB parts and group pieces per block of float
    auto value = [](int rank, size_t j) { return static_cast<float>((rank + 1) * static_cast<int>(j % 13 + 1)); };
    auto rankSum = [&](size_t j) {  // sum over ranks of value(rank, j)
      float t = 0;
      for (int q = 0; q < n; ++q) t += value(q, j);
      return t;
    };
    std::vector<float> in(blk * n);
    for (size_t j = 0; j < in.size(); ++j) in[j] = value(me, j);
    int calls = 0;

    r.progress("ReduceScatter in place, float Avg");
    DeviceBuffer rs(r, blk * n * 4);
    rs.upload(in.data(), in.size() * 4);
    float* rsMine = static_cast<float*>(rs.get()) + me * blk;
    HC_ASSERT_OK(hetcclReduceScatter(rs.get(), rsMine, blk, hetcclFloat32, hetcclAvg, r.comm, r.stream), r.comm);
    ++calls;

    r.progress("ReduceScatter out of place and Reduce in place, PreMulSum 0.5");
    float half = 0.5f;
    hetcclRedOp_t pre;
    HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&pre, &half, hetcclFloat32, hetcclScalarHostImmediate, r.comm), r.comm);
    DeviceBuffer rsIn(r, blk * n * 4), rsOut(r, blk * 4), red(r, blk * 4);
    rsIn.upload(in.data(), in.size() * 4);
    red.upload(in.data(), blk * 4);
    HC_ASSERT_OK(hetcclReduceScatter(rsIn.get(), rsOut.get(), blk, hetcclFloat32, pre, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclReduce(red.get(), red.get(), blk, hetcclFloat32, pre, n - 1, r.comm, r.stream), r.comm);
    calls += 2;

    r.progress("AlltoAll in place");
    std::vector<int32_t> a2a(blk * n);
    for (size_t j = 0; j < a2a.size(); ++j) a2a[j] = me * 1000000 + static_cast<int32_t>(j % 999983);
    DeviceBuffer a2aBuf(r, a2a.size() * 4);
    a2aBuf.upload(a2a.data(), a2a.size() * 4);
    HC_ASSERT_OK(hetcclAlltoAll(a2aBuf.get(), a2aBuf.get(), blk, hetcclInt32, r.comm, r.stream), r.comm);
    ++calls;

    r.progress("one group of AllReduce (Avg), AllGather and ReduceScatter");
    DeviceBuffer ar(r, blk * 4), agIn(r, blk * 4), ag(r, blk * n * 4), rs2(r, blk * 4);
    ar.upload(in.data(), blk * 4);
    agIn.upload(in.data(), blk * 4);
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclAllReduce(ar.get(), ar.get(), blk, hetcclFloat32, hetcclAvg, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclAllGather(agIn.get(), ag.get(), blk, hetcclFloat32, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclReduceScatter(rsIn.get(), rs2.get(), blk, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    calls += 3;
    syncStream(r);
    HC_EXPECT_OK(hetcclRedOpDestroy(pre, r.comm), r.comm);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);

    std::vector<float> got = readFloats(rs, blk * n), rsWant(blk), preWant(blk);
    for (size_t j = 0; j < blk; ++j) rsWant[j] = rankSum(me * blk + j) / static_cast<float>(n);
    EXPECT_EQ(std::vector<float>(got.begin() + me * blk, got.begin() + (me + 1) * blk), rsWant)
        << "ReduceScatter in place, Avg";
    for (size_t j = 0; j < blk; ++j) preWant[j] = 0.5f * rankSum(me * blk + j);
    EXPECT_EQ(readFloats(rsOut, blk), preWant) << "ReduceScatter, PreMulSum";
    if (me == n - 1) {
      for (size_t j = 0; j < blk; ++j) preWant[j] = 0.5f * rankSum(j);
      EXPECT_EQ(readFloats(red, blk), preWant) << "Reduce in place at the root, PreMulSum";
    }
    std::vector<int32_t> a2aGot = readBack(a2aBuf, a2a.size()), a2aWant(a2a.size());
    for (int q = 0; q < n; ++q)
      for (size_t j = 0; j < blk; ++j)
        a2aWant[q * blk + j] = q * 1000000 + static_cast<int32_t>((me * blk + j) % 999983);
    EXPECT_EQ(a2aGot, a2aWant) << "AlltoAll in place";
    std::vector<float> avg(blk), agWant;
    for (size_t j = 0; j < blk; ++j) avg[j] = rankSum(j) / static_cast<float>(n);
    EXPECT_EQ(readFloats(ar, blk), avg) << "AllReduce Avg in a group";
    for (int q = 0; q < n; ++q)
      for (size_t j = 0; j < blk; ++j) agWant.push_back(value(q, j));
    EXPECT_EQ(readFloats(ag, blk * n), agWant) << "AllGather in a group";
    for (size_t j = 0; j < blk; ++j) preWant[j] = rankSum(me * blk + j);
    EXPECT_EQ(readFloats(rs2, blk), preWant) << "ReduceScatter in a group";

    hetcclCommInfo_t info{};
    info.size = sizeof(info);
    HC_ASSERT_OK(hetcclCommGetInfo(r.comm, &info), r.comm);
    EXPECT_STREQ(info.borderPath, "device");
    EXPECT_EQ(info.pathCalls[hetcclPathDevice], static_cast<unsigned long long>(calls));
    EXPECT_EQ(info.pathCalls[hetcclPathStaged], 0ull) << "a call staged instead of taking the device border";
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, EmuBorderCalls, ::testing::Values("a,b", "a,a,b,b"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string s = i.param;
                           s.erase(std::remove(s.begin(), s.end(), ','), s.end());
                           return s;
                         });

// An integer PreMulSum (the scale kernel takes floats only) stages, and is
// right: counted on the staged path, not failed on the border.
TEST(EmuBorder, IntegerPreMulSumStagesAndIsRight) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, true);
  runJob("a,b", o, [](Rank& r) {
    const size_t count = 100000;
    int32_t three = 3;
    hetcclRedOp_t op;
    HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&op, &three, hetcclInt32, hetcclScalarHostImmediate, r.comm), r.comm);
    DeviceBuffer b(r, count * 4);
    b.upload(iota(count, r.rank + 1, 1).data(), count * 4);
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), count, hetcclInt32, op, r.comm, r.stream), r.comm);
    syncStream(r);
    HC_EXPECT_OK(hetcclRedOpDestroy(op, r.comm), r.comm);
    std::vector<int32_t> want(count);  // 3 x ((1 + j') + (2 + j')), j' = j mod 4093 (iota's period)
    for (size_t j = 0; j < count; ++j) want[j] = 3 * (3 + 2 * static_cast<int32_t>(j % 4093));
    EXPECT_EQ(readBack(b, count), want);
    hetcclCommInfo_t info{};
    info.size = sizeof(info);
    HC_ASSERT_OK(hetcclCommGetInfo(r.comm, &info), r.comm);
    EXPECT_EQ(info.pathCalls[hetcclPathStaged], 1ull);
    EXPECT_EQ(info.pathCalls[hetcclPathDevice], 0ull);
  });
}

// A staged call in groups of two (an integer PreMulSum: its group steps go
// to the vendor library from the proxy) followed at once, without a sync,
// by send/recv inside each group and a border AllReduce (both vendor library
// calls of the caller's thread, sent through the proxy while the staged call
// is queued there), three times: every rank's vendor calls keep one order,
// and every result is right.
TEST(EmuBorder, StagedGroupStepsThenSendRecvInTheGroupKeepOneOrder) {
  JobOptions o;
  o.devices = parseDevices("emu,emu,emu,emu");
  borderEnv(o, true);
  runJob("a,a,b,b", o, [](Rank& r) {
    const size_t count = 50000, m = 70001;
    const int rounds = 3, partner = r.rank ^ 1;  // the other rank of this group
    int32_t three = 3;
    hetcclRedOp_t op;
    HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&op, &three, hetcclInt32, hetcclScalarHostImmediate, r.comm), r.comm);
    DeviceBuffer x(r, count * 4), z(r, m * 4);
    std::vector<std::unique_ptr<DeviceBuffer>> y;
    for (int k = 0; k < rounds; ++k) y.push_back(std::make_unique<DeviceBuffer>(r, count * 4));
    x.upload(iota(count, r.rank + 1, 1).data(), count * 4);
    std::vector<float> ones(m, static_cast<float>(r.rank + 1));
    z.upload(ones.data(), m * 4);
    for (int k = 0; k < rounds; ++k) {
      HC_ASSERT_OK(hetcclAllReduce(x.get(), x.get(), count, hetcclInt32, op, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclGroupStart(), r.comm);
      HC_ASSERT_OK(hetcclSend(x.get(), count, hetcclInt32, partner, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclRecv(y[k]->get(), count, hetcclInt32, partner, r.comm, r.stream), r.comm);
      HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
      HC_ASSERT_OK(hetcclAllReduce(z.get(), z.get(), m, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    }
    syncStream(r);
    HC_EXPECT_OK(hetcclRedOpDestroy(op, r.comm), r.comm);
    // Round 0: 3 x sum over ranks of (rank + 1 + j') = 30 + 12 j'; each
    // later round multiplies by 3 x 4 (every rank holds the same).
    std::vector<int32_t> want(count);
    for (size_t j = 0; j < count; ++j) want[j] = 30 + 12 * static_cast<int32_t>(j % 4093);
    for (int k = 0; k < rounds; ++k) {
      EXPECT_EQ(readBack(*y[k], count), want) << "received from rank " << partner << " in round " << k;
      for (int32_t& v : want) v *= 12;
    }
    for (int32_t& v : want) v /= 12;
    EXPECT_EQ(readBack(x, count), want) << "the staged AllReduce";
    EXPECT_EQ(readFloats(z, m), std::vector<float>(m, 160.0f)) << "the border AllReduce (10, then x 4 twice)";
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.pathCalls[hetcclPathStaged], static_cast<unsigned long long>(rounds));
    EXPECT_EQ(info.pathCalls[hetcclPathDevice], static_cast<unsigned long long>(rounds));
    EXPECT_EQ(info.pathCalls[hetcclPathNone], static_cast<unsigned long long>(2 * rounds));
  });
}

// A rank whose buffers overlap without being in place, in a call the
// device border takes: refused by name (the border cannot take them, and
// staging alone would leave the peer waiting on the border), and the
// communicator fails, so the peer's call fails at once, not at its
// timeout.
TEST(EmuBorder, OverlappingBuffersAreRefusedAndThePeerFailsAtOnce) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, true);
  o.env.emplace_back("HETCCL_TIMEOUT_S", "60");
  runJob("a,b", o, [](Rank& r) {
    const size_t count = 100000;
    DeviceBuffer b(r, (count + 1) * 4);
    b.upload(iota(count + 1, r.rank, 1).data(), (count + 1) * 4);
    auto t0 = std::chrono::steady_clock::now();
    int32_t* at = static_cast<int32_t*>(b.get());
    hetcclResult_t res =
        hetcclAllReduce(at, at + (r.rank == 0 ? 1 : 0), count, hetcclInt32, hetcclSum, r.comm, r.stream);
    const std::string why = hetcclGetLastError(r.comm);
    if (r.rank == 0) {
      EXPECT_EQ(res, hetcclInvalidArgument) << why;
      EXPECT_NE(why.find("overlap without being in place"), std::string::npos) << why;
      int32_t one = 1;
      EXPECT_NE(hetcclAllReduce(&one, &one, 1, hetcclInt32, hetcclSum, r.comm, nullptr), hetcclSuccess)
          << "the communicator must stay failed";
    } else {
      syncStream(r);  // must come back
      hetcclResult_t async = hetcclSuccess;
      HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
      // The failure may reach the rank a moment after its stream went on.
      while (res == hetcclSuccess && async == hetcclSuccess && secondsSince(t0) < 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
      }
      EXPECT_TRUE(res != hetcclSuccess || async != hetcclSuccess) << "the peer's call went on";
    }
    EXPECT_LT(secondsSince(t0), 20) << "the peer must learn at once, not at its timeout: " << why;
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

}  // namespace
}  // namespace hmp
