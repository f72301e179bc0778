// Group calls: send/recv pairs posted in any order inside
// hetcclGroupStart/End complete without deadlock (every rank receiving
// before it sends, rings in both directions, sends to self, several messages
// to one peer), and several collectives aggregated in one group (nested
// groups too) all give their results.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "checks.h"
#include "layouts.h"

namespace hmp {
namespace {

// One send or receive: to/from `peer`, `count` int32s, message number `msg`.
struct P2p {
  bool send;
  int peer;
  size_t count;
  int msg;
};

// Data of message `msg` from `from` to `to`.
std::vector<uint8_t> payload(int from, int to, int msg, size_t count) {
  std::vector<uint8_t> v(count * 4);
  fillBytes(1000 + static_cast<uint64_t>(msg) * 64 + static_cast<uint64_t>(to), from, 0, v.data(), v.size());
  return v;
}

// Posts ops in the given order in one group call and checks every receive.
// Messages between one ordered pair are matched in posting order, so the
// per-peer order of sends and of receives is kept by every `order` used.
void exchange(const Rank& r, const std::vector<P2p>& ops, const std::string& what) {
  r.progress(what);
  std::vector<std::vector<uint8_t>> bufs;
  for (const P2p& op : ops) {
    bufs.push_back(op.send ? payload(r.rank, op.peer, op.msg, op.count) : std::vector<uint8_t>(op.count * 4, 0xEE));
    bufs.back().reserve(4);  // never a NULL data(): NULL buffers are the NullBuffers test's subject
  }
  HC_ASSERT_OK(hetcclGroupStart(), nullptr);
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2p& op = ops[i];
    if (op.send)
      HC_ASSERT_OK(hetcclSend(bufs[i].data(), op.count, hetcclInt32, op.peer, r.comm, nullptr), r.comm);
    else
      HC_ASSERT_OK(hetcclRecv(bufs[i].data(), op.count, hetcclInt32, op.peer, r.comm, nullptr), r.comm);
  }
  HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].send) continue;
    std::vector<uint8_t> want = payload(ops[i].peer, r.rank, ops[i].msg, ops[i].count);
    expectBytes(hetcclInt32, bufs[i].data(), want.data(), want.size(),
                what + ": message " + std::to_string(ops[i].msg) + " from rank " + std::to_string(ops[i].peer));
  }
}

// Every rank exchanges with every rank, itself included; counts differ by pair.
std::vector<P2p> allPairs(const Rank& r) {
  std::vector<P2p> v;
  for (int p = 0; p < r.nranks; ++p) {
    v.push_back({true, p, static_cast<size_t>(10 + 7 * r.rank + p), 0});
    v.push_back({false, p, static_cast<size_t>(10 + 7 * p + r.rank), 0});
  }
  return v;
}

void pointToPointOrders(const Rank& r) {
  const int n = r.nranks, me = r.rank;
  std::vector<P2p> base = allPairs(r);
  std::vector<P2p> recvFirst, sendFirst;
  for (const P2p& op : base) (op.send ? sendFirst : recvFirst).push_back(op);
  std::vector<P2p> rf = recvFirst, sf = sendFirst;
  rf.insert(rf.end(), sendFirst.begin(), sendFirst.end());
  sf.insert(sf.end(), recvFirst.begin(), recvFirst.end());
  exchange(r, rf, "all pairs, every rank receives before it sends");
  exchange(r, sf, "all pairs, every rank sends before it receives");
  std::vector<P2p> reversed(base.rbegin(), base.rend());
  exchange(r, reversed, "all pairs, peers in descending order");
  std::vector<P2p> shuffled = base;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(1234 + me));  // a different order on each rank
  exchange(r, shuffled, "all pairs, a random order per rank");

  // Rings: to the next and the previous rank at once, receives first on odd ranks.
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<P2p> ring = {{true, next, 1000, 0}, {true, prev, 999, 1}, {false, prev, 1000, 0}, {false, next, 999, 1}};
  if (me % 2) std::rotate(ring.begin(), ring.begin() + 2, ring.end());
  exchange(r, ring, "ring in both directions");

  // Several messages to one peer (sizes 0, 5, 3000) matched in order, and
  // sends to self posted before the matching receives.
  std::vector<P2p> multi;
  for (int m = 0; m < 3; ++m) multi.push_back({true, next, m == 0 ? 0u : m == 1 ? 5u : 3000u, m});
  for (int m = 0; m < 3; ++m) multi.push_back({false, prev, m == 0 ? 0u : m == 1 ? 5u : 3000u, m});
  for (int m = 3; m < 5; ++m) multi.push_back({true, me, 64, m});
  for (int m = 3; m < 5; ++m) multi.push_back({false, me, 64, m});
  exchange(r, multi, "three messages to one peer, two to self");
}

// AllReduce, Broadcast, AllGather, ReduceScatter and a ring of send/recv
// (receive posted first) in one group, Broadcast and AllGather in a nested group.
void aggregatedCollectives(const Rank& r) {
  r.progress("aggregated collectives");
  const int n = r.nranks, me = r.rank;
  const size_t cnt = 777;
  std::vector<int32_t> ar(cnt), bc(cnt), ag(cnt * n), rsIn(cnt * n), rs(cnt), ringOut(cnt);
  for (size_t i = 0; i < cnt; ++i) {
    ar[i] = static_cast<int32_t>(i) + me;
    bc[i] = me == 1 % n ? static_cast<int32_t>(3 * i) : -1;
  }
  for (size_t i = 0; i < cnt * n; ++i) rsIn[i] = static_cast<int32_t>(i % 13) * (me + 1);
  std::vector<int32_t> ringIn(cnt, me * 100);
  HC_ASSERT_OK(hetcclGroupStart(), nullptr);
  HC_ASSERT_OK(hetcclAllReduce(ar.data(), ar.data(), cnt, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclGroupStart(), nullptr);
  HC_ASSERT_OK(hetcclBroadcast(bc.data(), bc.data(), cnt, hetcclInt32, 1 % n, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclAllGather(ringIn.data(), ag.data(), cnt, hetcclInt32, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
  HC_ASSERT_OK(hetcclRecv(ringOut.data(), cnt, hetcclInt32, (me + n - 1) % n, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclReduceScatter(rsIn.data(), rs.data(), cnt, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclSend(ringIn.data(), cnt, hetcclInt32, (me + 1) % n, r.comm, nullptr), r.comm);
  HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
  const int32_t rankSum = n * (n - 1) / 2;
  size_t bad = 0;
  for (size_t i = 0; i < cnt; ++i) {
    bad += ar[i] != static_cast<int32_t>(i) * n + rankSum;
    bad += bc[i] != static_cast<int32_t>(3 * i);
    bad += ringOut[i] != ((me + n - 1) % n) * 100;
    for (int p = 0; p < n; ++p) bad += ag[p * cnt + i] != p * 100;
    bad += rs[i] != static_cast<int32_t>((me * cnt + i) % 13) * n * (n + 1) / 2;
  }
  EXPECT_EQ(bad, 0u) << "wrong elements in the results of a group of collectives";
}

// A send to self with no receive from self is a usage error, found before
// anything moves.
void unmatchedSelfSend(const Rank& r) {
  int32_t v = 1;
  HC_ASSERT_OK(hetcclGroupStart(), nullptr);
  HC_ASSERT_OK(hetcclSend(&v, 1, hetcclInt32, r.rank, r.comm, nullptr), r.comm);
  hetcclResult_t res = hetcclGroupEnd();
  EXPECT_EQ(res, hetcclInvalidUsage) << hetcclGetLastError(r.comm);
  EXPECT_NE(std::string(hetcclGetLastError(r.comm)).find("self"), std::string::npos) << hetcclGetLastError(r.comm);
}

struct GroupParam {
  std::string layout;
  std::string transport;
};

void PrintTo(const GroupParam& p, std::ostream* os) { *os << p.layout << " " << p.transport; }

class GroupCalls : public ::testing::TestWithParam<GroupParam> {};

TEST_P(GroupCalls, PointToPointInAnyOrder) {
  JobOptions opt;
  opt.transport = GetParam().transport;
  runJob(GetParam().layout, opt, pointToPointOrders);
}

TEST_P(GroupCalls, AggregatedCollectives) {
  JobOptions opt;
  opt.transport = GetParam().transport;
  runJob(GetParam().layout, opt, [](Rank& r) {
    aggregatedCollectives(r);
    aggregatedCollectives(r);  // twice: the group state is clean afterwards
    unmatchedSelfSend(r);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, GroupCalls,
                         ::testing::Values(GroupParam{"a,a,b,b", "shm"}, GroupParam{"a,a,b,b", "tcp"},
                                           GroupParam{"a,b,a,b", "shm"}, GroupParam{"a,b,c,c", "tcp"},
                                           GroupParam{"a,a,a,b,b,c,c,c", "shm"}, GroupParam{"a,a,a,a", "tcp"}),
                         [](const ::testing::TestParamInfo<GroupParam>& i) {
                           return layoutTag(i.param.layout) + "_" + i.param.transport;
                         });

}  // namespace
}  // namespace hmp
