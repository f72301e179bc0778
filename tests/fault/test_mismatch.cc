// Fault 5: ranks make calls that do not match: another collective, another
// count, data type, root, op or send/recv peer on one rank (the "odd" rank). Every rank must
// return within HETCCL_TIMEOUT_S + 5 s; at least one must fail with an error
// (hetcclInvalidUsage or hetcclRemoteError) whose text names both sides (both
// ranks and both calls); a rank that returns success must hold the correct
// result of its own call (no wrong data). Ranks that did not see the
// mismatch themselves may fail with a remote error (a timeout, or a peer
// that left).
//
// After any rank failed, the communicator is failed on every rank: the next
// (matching) AllReduce fails everywhere, none returns stale or wrong data.
//
// Run with the default settings (mismatches are caught from message tags
// when data flows; rooted calls first check their ring neighbours' tags) and
// with HETCCL_CHECK_MISMATCH=1 (every call is compared across all ranks
// first).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fault_job.h"

namespace hfault {
namespace {

// kSendRecv: every rank sends to `root` places ahead around the ring and
// receives from `root` places behind, in one group (Call::root is the ring
// step; a mismatched rank names another peer).
enum class Kind { kAllReduce, kBroadcast, kReduce, kGather, kScatter, kSendRecv };

struct Call {
  Kind kind = Kind::kAllReduce;
  size_t count = 1000;
  hetcclDataType_t dt = hetcclFloat32;
  hetcclRedOp_t op = hetcclSum;
  int root = 0;
};

struct MismatchCase {
  const char* name;
  Call normal, odd;
  int oddRank;
  const char* normalText;  // what the error must quote of each side's call
  const char* oddText;
  // Sends and receives that pair with nothing: as with NCCL, a receiver
  // cannot tell an unposted send from a late one, so this shows as a
  // timeout (or as a mismatch at a later call): an error must name the
  // call and a rank, not both sides.
  bool unpaired = false;
};

const MismatchCase kCases[] = {
    {"Kind", {Kind::kAllReduce, 1000}, {Kind::kBroadcast, 1000}, 3, "AllReduce #", "Broadcast #"},
    {"CountLarge", {Kind::kAllReduce, 1 << 18}, {Kind::kAllReduce, 1 << 17}, 3, "count 262144", "count 131072"},
    {"CountSmall", {Kind::kAllReduce, 1000}, {Kind::kAllReduce, 999}, 0, "count 1000", "count 999"},
    {"DataType",
     {Kind::kAllReduce, 1 << 16, hetcclFloat32},
     {Kind::kAllReduce, 1 << 16, hetcclInt32},
     3,
     "float",
     "int32"},
    {"Op",
     {Kind::kAllReduce, 1000, hetcclFloat32, hetcclSum},
     {Kind::kAllReduce, 1000, hetcclFloat32, hetcclMax},
     3,
     ", sum)",
     ", max)"},
    {"Root",
     {Kind::kBroadcast, 1 << 16, hetcclFloat32, hetcclSum, 0},
     {Kind::kBroadcast, 1 << 16, hetcclFloat32, hetcclSum, 3},
     3,
     "root 0",
     "root 3"},
    // Ranks 0 and 1 both think they are the root: neither receives anything.
    {"RootTwoRoots",
     {Kind::kBroadcast, 1000, hetcclFloat32, hetcclSum, 0},
     {Kind::kBroadcast, 1000, hetcclFloat32, hetcclSum, 1},
     1,
     "root 0",
     "root 1"},
    // Two roots of a Reduce wait for each other.
    {"ReduceRoot",
     {Kind::kReduce, 1000, hetcclFloat32, hetcclSum, 0},
     {Kind::kReduce, 1000, hetcclFloat32, hetcclSum, 1},
     1,
     "root 0",
     "root 1"},
    {"GatherRoot",
     {Kind::kGather, 1000, hetcclFloat32, hetcclSum, 0},
     {Kind::kGather, 1000, hetcclFloat32, hetcclSum, 2},
     2,
     "root 0",
     "root 2"},
    {"ScatterRoot",
     {Kind::kScatter, 1000, hetcclFloat32, hetcclSum, 0},
     {Kind::kScatter, 1000, hetcclFloat32, hetcclSum, 3},
     3,
     "root 3",
     "root 0"},
    {"SendRecvCount",
     {Kind::kSendRecv, 1 << 16, hetcclFloat32, hetcclSum, 1},
     {Kind::kSendRecv, 1 << 15, hetcclFloat32, hetcclSum, 1},
     2,
     "count 65536",
     "count 32768"},
    // Rank 1 sends to rank 3 and receives from rank 3 while the others move
    // one place around the ring: rank 0's send to rank 1, rank 1's to rank
    // 3, and the receives of ranks 1 and 2 have no partner.
    {"SendRecvPeer",
     {Kind::kSendRecv, 1000, hetcclFloat32, hetcclSum, 1},
     {Kind::kSendRecv, 1000, hetcclFloat32, hetcclSum, 2},
     1,
     "Send/Recv #1",
     "Send/Recv #1",
     true},
};

struct Param {
  const MismatchCase* mc;
  const char* layout;
  const char* transport;
  bool checkAll;  // HETCCL_CHECK_MISMATCH=1
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.mc->name << " " << p.layout << " " << p.transport; }

// Input element i of `rank` (as float or int32; small integers: exact in both).
double inputValue(int rank, size_t i) { return static_cast<double>((rank + 1) * 10 + static_cast<int>(i % 7)); }

hetcclResult_t ringExchange(hetcclComm_t comm, const Call& c, const void* send, void* recv, int rank, int nranks) {
  const int to = (rank + c.root) % nranks, from = (rank - c.root + nranks) % nranks;
  hetcclResult_t r = hetcclGroupStart();
  if (r != hetcclSuccess) return r;
  hetcclResult_t s = hetcclSend(send, c.count, c.dt, to, comm, nullptr);
  hetcclResult_t v = hetcclRecv(recv, c.count, c.dt, from, comm, nullptr);
  r = hetcclGroupEnd();
  return s != hetcclSuccess ? s : v != hetcclSuccess ? v : r;
}

// Fills the send buffer, runs the call, and checks the result of a call that
// returned success against what that call means if every rank made it.
int body(RankCtx& ctx, const Param& p) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  int32_t one = 1;
  r = hetcclAllReduce(&one, &one, 1, hetcclInt32, hetcclSum, comm, nullptr);
  ctx.reportCall("warmup", r, comm);
  const Call c = ctx.rank == p.mc->oddRank ? p.mc->odd : p.mc->normal;
  if (r != hetcclSuccess) {
    // A slower rank can still be in the warm-up when a faster one fails the
    // mismatched call: the failed communicator ends that call too.
    ctx.report("call.t0", now());
    ctx.reportCall("call", r, comm);
    ctx.report("next.t0", now());
    int32_t again = 1;
    ctx.reportCall("next", hetcclAllReduce(&again, &again, 1, hetcclInt32, hetcclSum, comm, nullptr), comm);
    hetcclCommAbort(comm);
    return 0;
  }

  const size_t n = c.count;
  // Gather's receive and Scatter's send hold one block per rank.
  const size_t nAll = n * static_cast<size_t>(ctx.nranks);
  const size_t sendN = c.kind == Kind::kScatter ? nAll : n, recvN = c.kind == Kind::kGather ? nAll : n;
  std::vector<float> sf(sendN), rf(recvN, -1.0f);
  std::vector<int32_t> si(sendN), ri(recvN, -1);
  for (size_t i = 0; i < sendN; ++i) {
    sf[i] = static_cast<float>(inputValue(ctx.rank, i));
    si[i] = static_cast<int32_t>(inputValue(ctx.rank, i));
  }
  const bool isF = c.dt == hetcclFloat32;
  const void* send = isF ? static_cast<const void*>(sf.data()) : si.data();
  void* recv = isF ? static_cast<void*>(rf.data()) : ri.data();
  double t0 = now();
  ctx.report("call.t0", t0);
  if (c.kind == Kind::kAllReduce)
    r = hetcclAllReduce(send, recv, n, c.dt, c.op, comm, nullptr);
  else if (c.kind == Kind::kReduce)
    r = hetcclReduce(send, recv, n, c.dt, c.op, c.root, comm, nullptr);
  else if (c.kind == Kind::kGather)
    r = hetcclGather(send, recv, n, c.dt, c.root, comm, nullptr);
  else if (c.kind == Kind::kScatter)
    r = hetcclScatter(send, recv, n, c.dt, c.root, comm, nullptr);
  else if (c.kind == Kind::kSendRecv)
    r = ringExchange(comm, c, send, recv, ctx.rank, ctx.nranks);
  else
    r = hetcclBroadcast(send, recv, n, c.dt, c.root, comm, nullptr);
  ctx.reportCall("call", r, comm);
  const bool hasOutput = !((c.kind == Kind::kReduce || c.kind == Kind::kGather) && c.root != ctx.rank);
  if (r == hetcclSuccess && hasOutput) {
    size_t wrong = 0;
    const int from = (ctx.rank - c.root + ctx.nranks) % ctx.nranks;
    for (size_t i = 0; i < recvN; ++i) {
      double want = 0;
      if (c.kind == Kind::kBroadcast) {
        want = inputValue(c.root, i);
      } else if (c.kind == Kind::kGather) {
        want = inputValue(static_cast<int>(i / n), i % n);
      } else if (c.kind == Kind::kScatter) {
        want = inputValue(c.root, static_cast<size_t>(ctx.rank) * n + i);
      } else if (c.kind == Kind::kSendRecv) {
        want = inputValue(from, i);
      } else {
        for (int k = 0; k < ctx.nranks; ++k) {
          double v = inputValue(k, i);
          want = k == 0 ? v : (c.op == hetcclMax ? std::max(want, v) : want + v);
        }
      }
      double got = isF ? rf[i] : ri[i];
      if (got != want && wrong++ == 0)
        ctx.report("wrong.first",
                   "element " + std::to_string(i) + " = " + std::to_string(got) + ", expected " + std::to_string(want));
    }
    ctx.report("wrong", static_cast<long long>(wrong));
  }
  {
    // Whatever the mismatch left behind (unread messages) must not turn into
    // wrong data in the next, matching call; where a rank failed, that call
    // fails on every rank.
    std::vector<float> in(1000), out(1000, -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(inputValue(ctx.rank, i));
    ctx.report("next.t0", now());
    r = hetcclAllReduce(in.data(), out.data(), in.size(), hetcclFloat32, hetcclSum, comm, nullptr);
    ctx.reportCall("next", r, comm);
    if (r == hetcclSuccess) {
      size_t bad = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        double want = 0;
        for (int k = 0; k < ctx.nranks; ++k) want += inputValue(k, i);
        if (out[i] != want) ++bad;
      }
      ctx.report("next.wrong", static_cast<long long>(bad));
    }
  }
  r = hetcclCommAbort(comm);
  ctx.report("abort.code", static_cast<long long>(r));
  return 0;
}

class Mismatch : public ::testing::TestWithParam<Param> {};

TEST_P(Mismatch, ErrorNamesBothSidesNoWrongDataNoHang) {
  const Param p = GetParam();
  JobSpec spec;
  spec.layout = p.layout;
  spec.transport = p.transport;
  spec.timeoutS = 5;
  if (p.checkAll) spec.env.emplace_back("HETCCL_CHECK_MISMATCH", "1");
  Job job(spec, [&p](RankCtx& ctx) { return body(ctx, p); });
  ASSERT_TRUE(job.started()) << job.startError();
  const double limitS = spec.timeoutS + 5;
  EXPECT_TRUE(job.finish(limitS + 20)) << job.describe();

  int errors = 0, bothSides = 0, nextFailed = 0;
  std::string summary;
  for (int r = 0; r < job.nranks(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankEnd& e = job.end(r);
    EXPECT_TRUE(e.ended && !e.hung && e.signal == 0 && e.exitCode == 0) << job.describe();
    ASSERT_TRUE(job.has(r, "call.code")) << job.describe();
    const int code = atoi(job.get(r, "call.code").c_str());
    const std::string err = job.get(r, "call.err");
    const double took = job.getD(r, "call.t") - job.getD(r, "call.t0");
    EXPECT_LE(took, limitS) << "the call took too long: " << err;
    char line[96];
    snprintf(line, sizeof(line), "\n[fault]   rank %d: %d after %.3f s", r, code, took);
    summary += line;
    if (job.has(r, "next.code")) {
      const double nextTook = job.getD(r, "next.t") - job.getD(r, "next.t0");
      EXPECT_LE(nextTook, limitS) << "the call after the mismatch hung";
      if (job.get(r, "next.code") != "0") ++nextFailed;
      if (job.has(r, "next.wrong")) {
        EXPECT_EQ(job.get(r, "next.wrong"), "0") << "the mismatch corrupted the next call";
      }
    }
    if (code == hetcclSuccess) {
      if (job.has(r, "wrong")) {
        EXPECT_EQ(job.get(r, "wrong"), "0") << "success with wrong data: " << job.get(r, "wrong.first");
      }
      summary += " (success, " + job.get(r, "wrong") + " wrong elements); next AllReduce: " + job.get(r, "next.code") +
                 " " + job.get(r, "next.err");
      continue;
    }
    summary += ": " + err;
    ++errors;
    EXPECT_TRUE(code == hetcclInvalidUsage || code == hetcclRemoteError) << "code " << code << ": " << err;
    std::vector<int> named = ranksNamed(err);
    bool namesOdd = std::find(named.begin(), named.end(), p.mc->oddRank) != named.end() || p.mc->unpaired;
    bool namesOther = std::any_of(named.begin(), named.end(), [&](int k) { return k != p.mc->oddRank; }) ||
                      (p.mc->unpaired && !named.empty());
    // Unpaired: which rank times out first (in the send/recv or in the next
    // call), and what its peers then see, is a race: an error naming a rank.
    const bool texts = p.mc->unpaired || (err.find(p.mc->normalText) != std::string::npos &&
                                          err.find(p.mc->oddText) != std::string::npos);
    if (namesOdd && namesOther && texts) ++bothSides;
  }
  printf("[fault] mismatch %s on %s %s%s: %d of %d ranks failed, %d named both sides%s\n", p.mc->name, p.layout,
         p.transport, p.checkAll ? " HETCCL_CHECK_MISMATCH=1" : "", errors, job.nranks(), bothSides, summary.c_str());
  EXPECT_GE(errors, 1) << "nobody noticed the mismatch\n" << job.describe();
  EXPECT_EQ(nextFailed, job.nranks()) << "after the failure, the communicator must be failed on every rank\n"
                                      << job.describe();
  EXPECT_GE(bothSides, 1) << "no rank's error names both ranks and both calls (or, unpaired, a rank and the call: '"
                          << p.mc->normalText << "' and '" << p.mc->oddText << "')\n"
                          << job.describe();
  if (p.checkAll) {
    EXPECT_EQ(bothSides, job.nranks()) << "with HETCCL_CHECK_MISMATCH=1 every rank must see it";
  }
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (const auto& mc : kCases) {
    out.push_back(Param{&mc, "a,a,b,b", "shm", false});
    out.push_back(Param{&mc, "a,a,a,a", "shm", false});
    out.push_back(Param{&mc, "a,a,b,b", "tcp", false});
  }
  out.push_back(Param{&kCases[5], "a,a,b,b", "shm", true});
  out.push_back(Param{&kCases[0], "a,a,a,a", "tcp", true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fault, Mismatch, ::testing::ValuesIn(params()), [](const ::testing::TestParamInfo<Param>& i) {
  std::string layout;
  for (const char* c = i.param.layout; *c; ++c)
    if (*c != ',') layout += *c;
  return std::string(i.param.mc->name) + "_" + layout + "_" + i.param.transport + (i.param.checkAll ? "_checkall" : "");
});

}  // namespace
}  // namespace hfault
