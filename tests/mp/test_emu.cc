// Ranks on emulated GPUs (device kind emu: libhetccl-emu.so, groups run by
// libhetccl-emu-nccl.so): group calls and failures as GPU ranks meet them,
// with device buffers and stream-ordered calls. Every collective x type x op
// on these layouts is gpu_matrix's (tests/gpu, ctest emu.matrix_*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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

// 2+2 staged and direct, 3+1, 1+1+2 in chunks, interleaved, 8 ranks in 3
// groups, an emu group next to a host group.
const EmuCase kCases[] = {
    {"aabb_shm_staged", "a,a,b,b", "emu,emu,emu,emu", "shm", {{"HETCCL_GPU_DIRECT", "0"}}},
    {"aabb_tcp_direct", "a,a,b,b", "emu,emu,emu,emu", "tcp", {{"HETCCL_GPU_DIRECT", "1"}}},
    {"aaab_shm", "a,a,a,b", "emu,emu,emu,emu", "shm", {}},
    {"abcc_shm_chunked", "a,b,c,c", "emu,emu,emu,emu", "shm", {{"HETCCL_CHUNK_BYTES", "64K"}}},
    {"abab_tcp_direct", "a,b,a,b", "emu,emu,emu,emu", "tcp", {{"HETCCL_GPU_DIRECT", "1"}}},
    {"aaabbccc_shm", "a,a,a,b,b,c,c,c", "emu,emu,emu,emu,emu,emu,emu,emu", "shm", {}},
    {"emu_next_to_host_shm", "a,a,b,b", "emu,emu,host,host", "shm", {}},
    // Staged, cut by border bandwidth (rates by rank: uneven shards through
    // the vendor library's grouped Reduce and Broadcast calls).
    {"aabb_shm_staged_bwcut",
     "a,a,b,b",
     "emu,emu,emu,emu",
     "shm_bwcut",
     {{"HETCCL_GPU_DIRECT", "0"}, {"HETCCL_GPU_BORDER", "0"}}},
};

// With the device border from 1 MiB on (as where two ranks share one GPU),
// so that smaller calls take the staged and direct paths these layouts are
// for; the border's own tests set their sizes.
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
// the chunked and direct paths), then one of point-to-point calls in both
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

std::vector<float> readFloats(const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * 4);
  return v;
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
