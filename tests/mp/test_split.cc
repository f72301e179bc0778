// hetcclCommSplit (color by rank parity, key reversed) and collectives on
// the new communicators; hetcclCommGetInfo on every layout, also through an
// older (smaller) hetcclCommInfo_t.
#include <gtest/gtest.h>

#include <cstddef>

#include "checks.h"
#include "layouts.h"

namespace hmp {
namespace {

// A Rank for a communicator made by a split: the members' group names in
// new-rank order.
Rank splitView(const Rank& parent, hetcclComm_t comm, const std::vector<int>& members, int newRank) {
  Rank v;
  v.comm = comm;
  v.rank = newRank;
  v.nranks = static_cast<int>(members.size());
  for (int m : members) v.layout.push_back(parent.layout[m]);
  v.group = parent.group;
  v.transport = parent.transport;
  v.scope = "split of " + std::to_string(members.size()) + " ranks from " + std::to_string(members[0]) + ": ";
  return v;
}

// Collectives on a split communicator, checked like the matrix does.
void checkCollectives(const Rank& v) {
  Checker ck(v);
  uint64_t seed = 500;
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast, Coll::kReduceScatter, Coll::kSendRecv})
    for (hetcclDataType_t dt : {hetcclInt32, hetcclFloat32, hetcclBfloat16}) {
      Check c;
      c.coll = coll;
      c.dt = dt;
      c.op = Op::kAvg;
      c.count = 1001;
      c.root = v.nranks - 1;
      c.seed = ++seed;
      ck.run(c);
    }
}

void splitByParity(Rank& r) {
  const int n = r.nranks, me = r.rank;
  hetcclComm_t sub = nullptr;
  hetcclConfig_t sameTransport = HETCCL_CONFIG_INITIALIZER;
  sameTransport.transport = r.transport.c_str();
  r.progress("hetcclCommSplit by parity");
  HC_ASSERT_OK(hetcclCommSplit(r.comm, me % 2, n - me, &sub, &sameTransport), r.comm);
  ASSERT_NE(sub, nullptr);
  // Members of my color, ordered by key = n - rank: highest parent rank first.
  std::vector<int> members;
  for (int p = n - 1; p >= 0; --p)
    if (p % 2 == me % 2) members.push_back(p);
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  int got = -1;
  HC_EXPECT_OK(hetcclCommCount(sub, &got), sub);
  EXPECT_EQ(got, static_cast<int>(members.size()));
  HC_EXPECT_OK(hetcclCommUserRank(sub, &got), sub);
  EXPECT_EQ(got, newRank);
  Rank v = splitView(r, sub, members, newRank);
  expectInfoMatchesLayout(v);  // the parent's groups, restricted to the members
  checkCollectives(v);

  // A second split: rank 0 opts out; the others, all in one group "z".
  hetcclComm_t rest = reinterpret_cast<hetcclComm_t>(0x1);
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.groupName = "z";
  cfg.transport = r.transport.c_str();
  r.progress("hetcclCommSplit with NOCOLOR");
  HC_ASSERT_OK(hetcclCommSplit(r.comm, me == 0 ? HETCCL_SPLIT_NOCOLOR : 7, me, &rest, &cfg), r.comm);
  if (me == 0) {
    EXPECT_EQ(rest, nullptr) << "a rank with HETCCL_SPLIT_NOCOLOR gets no communicator";
  } else {
    ASSERT_NE(rest, nullptr);
    std::vector<int> restMembers;
    for (int p = 1; p < n; ++p) restMembers.push_back(p);
    Rank w = splitView(r, rest, restMembers, me - 1);
    w.layout.assign(restMembers.size(), "z");
    w.group = "z";
    expectInfoMatchesLayout(w);
    checkCollectives(w);
    HC_EXPECT_OK(hetcclCommDestroy(rest), rest);
  }

  // The parent still works after the splits.
  Checker ck(r);
  Check c;
  c.coll = Coll::kAllReduce;
  c.dt = hetcclInt64;
  c.count = 100;
  c.seed = 900;
  ck.run(c);
  HC_EXPECT_OK(hetcclCommDestroy(sub), sub);
}

struct SplitParam {
  std::string layout;
  std::string transport;
};

void PrintTo(const SplitParam& p, std::ostream* os) { *os << p.layout << " " << p.transport; }

class Split : public ::testing::TestWithParam<SplitParam> {};

TEST_P(Split, ByParityKeyReversed) {
  JobOptions opt;
  opt.transport = GetParam().transport;
  runJob(GetParam().layout, opt, splitByParity);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Split,
                         ::testing::Values(SplitParam{"a,a,b,b", "shm"}, SplitParam{"a,b,a,b", "tcp"},
                                           SplitParam{"a,a,a,b,b,c,c,c", "tcp"}, SplitParam{"a,b,c,c", "shm"}),
                         [](const ::testing::TestParamInfo<SplitParam>& i) {
                           return layoutTag(i.param.layout) + "_" + i.param.transport;
                         });

// A split with a NULL config inherits the parent's settings, as in NCCL:
// its group (the library does this), timeout and transport.
TEST(Split, NullConfigInheritsTransport) {
  JobOptions opt;
  opt.transport = "tcp";  // not the default on one host (auto picks shm)
  runJob("a,a,b,b", opt, [](Rank& r) {
    hetcclComm_t sub = nullptr;
    HC_ASSERT_OK(hetcclCommSplit(r.comm, 0, r.rank, &sub, nullptr), r.comm);
    hetcclCommInfo_t info{};
    info.size = sizeof(info);
    HC_EXPECT_OK(hetcclCommGetInfo(sub, &info), sub);
    EXPECT_STREQ(info.transport, "tcp") << "the split communicator did not inherit the parent's transport";
    EXPECT_EQ(info.ngroups, 2) << "the split communicator did not inherit the parent's groups";
    HC_EXPECT_OK(hetcclCommDestroy(sub), sub);
  });
}

// GetInfo on every layout and transport (the matrix checks it too, per job),
// and through the first version of the struct: a caller built against an
// older header passes a smaller size and gets what fits.
class Info : public ::testing::TestWithParam<std::string> {};

TEST_P(Info, ReportsLayout) {
  for (const std::string& transport : allTransports()) {
    JobOptions opt;
    opt.transport = transport;
    runJob(GetParam(), opt, [](Rank& r) {
      expectInfoMatchesLayout(r);
      hetcclCommInfo_t small{};
      const size_t oldSize = offsetof(hetcclCommInfo_t, borderPeers);
      small.size = oldSize;
      small.borderPeers = -7;
      HC_ASSERT_OK(hetcclCommGetInfo(r.comm, &small), r.comm);
      EXPECT_EQ(small.size, oldSize);
      EXPECT_EQ(small.borderPeers, -7) << "a field beyond the caller's size was written";
      EXPECT_EQ(small.rank, r.rank);
      EXPECT_EQ(small.nranks, r.nranks);
      EXPECT_STREQ(small.transport, r.transport.c_str());
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Info, ::testing::ValuesIn(allLayouts()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return layoutTag(i.param); });

}  // namespace
}  // namespace hmp
