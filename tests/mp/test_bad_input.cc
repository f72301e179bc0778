// Bad input: every argument check returns the documented code and
// hetcclGetLastError names the argument; nothing crashes or hangs, and the
// communicator still works afterwards. Argument errors are found before any
// communication, so each rank checks them on its own.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"
#include "layouts.h"

namespace hmp {
namespace {

constexpr hetcclResult_t kArg = hetcclInvalidArgument;

// Every collective and send/recv with one argument broken.
void badCollectiveArgs(Rank& r) {
  hetcclComm_t c = r.comm;
  const int me = r.rank, n = r.nranks;
  std::vector<float> a(64), b(64 * n);
  float* s = a.data();
  float* d = b.data();
  const auto f = hetcclFloat32;

  // Null buffers with count > 0 (buffers a rank does not use may be null).
  EXPECT_HC_ERROR(hetcclAllReduce(nullptr, d, 8, f, hetcclSum, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclAllReduce(s, nullptr, 8, f, hetcclSum, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclBroadcast(nullptr, d, 8, f, me, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclBroadcast(s, nullptr, 8, f, me, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclReduce(nullptr, d, 8, f, hetcclSum, me, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclReduce(s, nullptr, 8, f, hetcclSum, me, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclAllGather(nullptr, d, 8, f, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclAllGather(s, nullptr, 8, f, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclReduceScatter(nullptr, d, 8, f, hetcclSum, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclReduceScatter(s, nullptr, 8, f, hetcclSum, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclAlltoAll(nullptr, d, 8, f, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclAlltoAll(s, nullptr, 8, f, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclGather(nullptr, d, 8, f, me, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclGather(s, nullptr, 8, f, me, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclScatter(nullptr, d, 8, f, me, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclScatter(s, nullptr, 8, f, me, c, nullptr), kArg, c, "recvbuff");
  EXPECT_HC_ERROR(hetcclSend(nullptr, 8, f, (me + 1) % n, c, nullptr), kArg, c, "sendbuff");
  EXPECT_HC_ERROR(hetcclRecv(nullptr, 8, f, (me + 1) % n, c, nullptr), kArg, c, "recvbuff");

  // Unknown data types.
  for (int bad : {99, -1, static_cast<int>(hetcclNumTypes)}) {
    auto t = static_cast<hetcclDataType_t>(bad);
    EXPECT_HC_ERROR(hetcclAllReduce(s, d, 8, t, hetcclSum, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclBroadcast(s, d, 8, t, 0, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclReduce(s, d, 8, t, hetcclSum, 0, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclAllGather(s, d, 8, t, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclReduceScatter(s, d, 8, t, hetcclSum, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclAlltoAll(s, d, 8, t, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclGather(s, d, 8, t, 0, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclScatter(s, d, 8, t, 0, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclSend(s, 8, t, 0, c, nullptr), kArg, c, "datatype");
    EXPECT_HC_ERROR(hetcclRecv(d, 8, t, 0, c, nullptr), kArg, c, "datatype");
  }

  // Unknown ops: never valid, or a PreMulSum slot that was never created.
  for (int bad : {77, -1, static_cast<int>(hetcclNumOps), static_cast<int>(hetcclMaxRedOp)}) {
    auto op = static_cast<hetcclRedOp_t>(bad);
    EXPECT_HC_ERROR(hetcclAllReduce(s, d, 8, f, op, c, nullptr), kArg, c, "op");
    EXPECT_HC_ERROR(hetcclReduce(s, d, 8, f, op, 0, c, nullptr), kArg, c, "op");
    EXPECT_HC_ERROR(hetcclReduceScatter(s, d, 8, f, op, c, nullptr), kArg, c, "op");
  }

  // Root and peer out of range.
  for (int bad : {-1, n, INT_MAX}) {
    EXPECT_HC_ERROR(hetcclBroadcast(s, d, 8, f, bad, c, nullptr), kArg, c, "root");
    EXPECT_HC_ERROR(hetcclReduce(s, d, 8, f, hetcclSum, bad, c, nullptr), kArg, c, "root");
    EXPECT_HC_ERROR(hetcclGather(s, d, 8, f, bad, c, nullptr), kArg, c, "root");
    EXPECT_HC_ERROR(hetcclScatter(s, d, 8, f, bad, c, nullptr), kArg, c, "root");
    EXPECT_HC_ERROR(hetcclSend(s, 8, f, bad, c, nullptr), kArg, c, "peer");
    EXPECT_HC_ERROR(hetcclRecv(d, 8, f, bad, c, nullptr), kArg, c, "peer");
  }

  // Counts whose byte size overflows size_t (per rank pair times nranks for
  // the gathering and scattering calls).
  const size_t huge = SIZE_MAX, perRankHuge = SIZE_MAX / 4 / static_cast<size_t>(n) + 1;
  EXPECT_HC_ERROR(hetcclAllReduce(s, d, huge, f, hetcclSum, c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclBroadcast(s, d, huge, f, 0, c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclReduce(s, d, huge, f, hetcclSum, 0, c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclSend(s, huge, f, 0, c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclRecv(d, huge, f, 0, c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclAllReduce(s, d, SIZE_MAX / 2, hetcclFloat64, hetcclSum, c, nullptr), kArg, c, "count");
  for (size_t cnt : {huge, perRankHuge}) {
    EXPECT_HC_ERROR(hetcclAllGather(s, d, cnt, f, c, nullptr), kArg, c, "count");
    EXPECT_HC_ERROR(hetcclReduceScatter(s, d, cnt, f, hetcclSum, c, nullptr), kArg, c, "count");
    EXPECT_HC_ERROR(hetcclAlltoAll(s, d, cnt, f, c, nullptr), kArg, c, "count");
    EXPECT_HC_ERROR(hetcclGather(s, d, cnt, f, 0, c, nullptr), kArg, c, "count");
    EXPECT_HC_ERROR(hetcclScatter(s, d, cnt, f, 0, c, nullptr), kArg, c, "count");
  }

  // Host ranks take no stream.
  int fakeStream = 0;
  EXPECT_HC_ERROR(hetcclAllReduce(s, d, 8, f, hetcclSum, c, &fakeStream), kArg, c, "stream");
}

// PreMulSum ops: bad creation arguments, and ops used with the wrong type or
// after they were destroyed.
void badOps(Rank& r) {
  hetcclComm_t c = r.comm;
  float scalar = 2, s[4] = {1, 2, 3, 4}, d[4];
  hetcclRedOp_t op;
  EXPECT_HC_ERROR(hetcclRedOpCreatePreMulSum(nullptr, &scalar, hetcclFloat32, hetcclScalarHostImmediate, c), kArg, c,
                  "op");
  EXPECT_HC_ERROR(hetcclRedOpCreatePreMulSum(&op, nullptr, hetcclFloat32, hetcclScalarHostImmediate, c), kArg, c,
                  "scalar");
  EXPECT_HC_ERROR(
      hetcclRedOpCreatePreMulSum(&op, &scalar, static_cast<hetcclDataType_t>(99), hetcclScalarHostImmediate, c), kArg,
      c, "datatype");
  EXPECT_HC_ERROR(hetcclRedOpCreatePreMulSum(&op, &scalar, hetcclFloat32, static_cast<hetcclScalarResidence_t>(5), c),
                  kArg, c, "residence");
  HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&op, &scalar, hetcclFloat32, hetcclScalarHostImmediate, c), c);
  EXPECT_HC_ERROR(hetcclAllReduce(s, d, 4, hetcclFloat64, op, c, nullptr), kArg, c, "PreMulSum");
  HC_ASSERT_OK(hetcclRedOpDestroy(op, c), c);
  EXPECT_HC_ERROR(hetcclAllReduce(s, d, 4, hetcclFloat32, op, c, nullptr), kArg, c, "op");
  EXPECT_HC_ERROR(hetcclRedOpDestroy(op, c), kArg, c, "op");
  EXPECT_HC_ERROR(hetcclRedOpDestroy(hetcclSum, c), kArg, c, "op");
}

void badQueries(Rank& r) {
  hetcclComm_t c = r.comm;
  EXPECT_HC_ERROR(hetcclCommCount(c, nullptr), kArg, c, "count");
  EXPECT_HC_ERROR(hetcclCommUserRank(c, nullptr), kArg, c, "rank");
  EXPECT_HC_ERROR(hetcclCommGetInfo(c, nullptr), kArg, c, "info");
  EXPECT_HC_ERROR(hetcclCommGetAsyncError(c, nullptr), kArg, c, "asyncError");
  hetcclCommInfo_t info{};
  info.size = 4;
  EXPECT_HC_ERROR(hetcclCommGetInfo(c, &info), kArg, c, "size");
  hetcclComm_t split = nullptr;
  EXPECT_HC_ERROR(hetcclCommSplit(c, 0, 0, nullptr, nullptr), kArg, c, "newcomm");
  EXPECT_HC_ERROR(hetcclCommSplit(c, -5, 0, &split, nullptr), kArg, c, "color");
  EXPECT_HC_ERROR(hetcclGroupEnd(), hetcclInvalidUsage, nullptr, "hetcclGroupStart");
  EXPECT_HC_ERROR(hetcclGetVersion(nullptr), kArg, nullptr, "version");
  EXPECT_HC_ERROR(hetcclGetUniqueId(nullptr), kArg, nullptr, "uniqueId");
  int version = 0;
  HC_EXPECT_OK(hetcclGetVersion(&version), nullptr);
  EXPECT_EQ(version, HETCCL_VERSION_CODE);
}

// After all of the above the communicator must be as good as new.
void stillWorks(Rank& r) {
  hetcclResult_t async = hetcclInternalError;
  HC_ASSERT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
  EXPECT_EQ(async, hetcclSuccess) << "argument errors must not poison the communicator";
  std::vector<int32_t> in(5, r.rank + 1), out(5, 0);
  HC_ASSERT_OK(hetcclAllReduce(in.data(), out.data(), 5, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
  for (int32_t v : out) EXPECT_EQ(v, r.nranks * (r.nranks + 1) / 2);
  // Null buffers are fine when nothing moves.
  HC_EXPECT_OK(hetcclAllReduce(nullptr, nullptr, 0, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
}

class BadInput : public ::testing::TestWithParam<std::string> {};

TEST_P(BadInput, CollectiveArguments) {
  JobOptions opt;
  opt.transport = GetParam();
  runJob("a,a,b", opt, [](Rank& r) {
    badCollectiveArgs(r);
    badOps(r);
    badQueries(r);
    stillWorks(r);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, BadInput, ::testing::ValuesIn(transportsWithUcx()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
INSTANTIATE_TEST_SUITE_P(NetPlugin, BadInput, ::testing::Values("net"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace hmp
