// topology/: group maps and names, topology building, peer records, and the
// border assignment checked from every rank's view at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "topology/border.h"
#include "topology/groups.h"
#include "topology/peer.h"
#include "unit_util.h"

namespace hetccl {
namespace {

using test::EnvGuard;

PeerInfo peer(int rank, const char* group, const char* kind = "host", uint64_t host = 1) {
  PeerInfo p;
  p.rank = rank;
  p.hostHash = host;
  snprintf(p.hostname, sizeof(p.hostname), "node%llu", static_cast<unsigned long long>(host));
  snprintf(p.deviceKind, sizeof(p.deviceKind), "%s", kind);
  snprintf(p.group, sizeof(p.group), "%s", group);
  return p;
}

// labels[r]: the group of rank r, named "g<label>".
Topology topoOf(const std::vector<int>& labels) {
  std::vector<PeerInfo> peers;
  for (size_t r = 0; r < labels.size(); ++r)
    peers.push_back(peer(static_cast<int>(r), ("g" + std::to_string(labels[r])).c_str()));
  return buildTopology(peers);
}

// ---- group names ----

TEST(GroupMap, RangesAndSingleRanks) {
  const std::string map = "0-1:a,2-3:b,5:c";
  EXPECT_EQ(groupFromMap(map, 0), "a");
  EXPECT_EQ(groupFromMap(map, 1), "a");
  EXPECT_EQ(groupFromMap(map, 2), "b");
  EXPECT_EQ(groupFromMap(map, 3), "b");
  EXPECT_EQ(groupFromMap(map, 4), "");
  EXPECT_EQ(groupFromMap(map, 5), "c");
  EXPECT_EQ(groupFromMap(map, 6), "");
  EXPECT_EQ(groupFromMap(",7:x,,", 7), "x");  // empty items are skipped
  EXPECT_EQ(groupFromMap("", 0), "");
}

TEST(GroupMap, MalformedMapsAreInvalidArgument) {
  for (const char* bad : {"0-1", ":a", "0-1:", "x:a", "1-x:a", "3-1:a", "-1:a", "0--1:a", "5:a,junk"}) {
    SCOPED_TRACE(bad);
    EXPECT_HETCCL_ERROR(groupFromMap(bad, 0), hetcclInvalidArgument, "HETCCL_GROUP_MAP");
  }
}

// A malformed map must fail on every rank alike, not only on the ranks whose
// entry comes after the bad item (else some ranks join and wait for the rest).
TEST(GroupMap, MalformedItemFailsEvenForRanksNamedBeforeIt) {
  EXPECT_HETCCL_ERROR(groupFromMap("0-1:a,junk", 0), hetcclInvalidArgument, "junk");
  EXPECT_HETCCL_ERROR(groupFromMap("0-1:a,2-3:b,4-x:c", 2), hetcclInvalidArgument, "HETCCL_GROUP_MAP");
}

// Every rank can tell on its own that a map leaves ranks out, names too
// many or names one twice: it fails at once, naming the map.
TEST(GroupMap, MapMustNameEveryRankOnce) {
  EXPECT_NO_THROW(checkMapCovers("0-1:a,2-3:b", 4));
  EXPECT_HETCCL_ERROR(checkMapCovers("0:a", 4), hetcclInvalidArgument, "does not name ranks 1,2,3 of 4");
  EXPECT_HETCCL_ERROR(checkMapCovers("0:a", 4), hetcclInvalidArgument, "'0:a'");
  EXPECT_HETCCL_ERROR(checkMapCovers("0-7:a", 4), hetcclInvalidArgument, "names rank 7");
  EXPECT_HETCCL_ERROR(groupFromMap("0-1:a,1-3:b", 0), hetcclInvalidArgument, "both name rank 1");
  EnvGuard m("HETCCL_GROUP_MAP", "0:a"), g("HETCCL_GROUP", nullptr);
  EXPECT_HETCCL_ERROR(resolveGroupName(0, 4, "host", nullptr), hetcclInvalidArgument, "HETCCL_GROUP_MAP '0:a'");
}

TEST(GroupName, Precedence) {
  EnvGuard a("HETCCL_GROUP", "fromenv"), b("HETCCL_GROUP_MAP", "0:mapped0,1:mapped1");
  EXPECT_EQ(resolveGroupName(1, 2, "host", "fromconfig"), "fromconfig");
  EXPECT_EQ(resolveGroupName(1, 2, "host", nullptr), "fromenv");
  EXPECT_EQ(resolveGroupName(1, 2, "host", ""), "fromenv");
  {
    EnvGuard c("HETCCL_GROUP", nullptr);
    EXPECT_EQ(resolveGroupName(1, 2, "host", nullptr), "mapped1");
    EXPECT_EQ(resolveGroupName(0, 2, "cuda", nullptr), "mapped0");
    EXPECT_HETCCL_ERROR(resolveGroupName(2, 3, "host", nullptr), hetcclInvalidArgument, "rank 2");
    EnvGuard d("HETCCL_GROUP_MAP", nullptr);
    EXPECT_EQ(resolveGroupName(1, 2, "cuda", nullptr), "cuda");
    EXPECT_EQ(resolveGroupName(1, 2, "host", nullptr), "host");
  }
  EXPECT_HETCCL_ERROR(resolveGroupName(0, 2, "host", std::string(32, 'n').c_str()), hetcclInvalidArgument, "31");
  EXPECT_EQ(resolveGroupName(0, 2, "host", std::string(31, 'n').c_str()), std::string(31, 'n'));
}

// ---- topology ----

TEST(BuildTopology, GroupsByLowestRankRanksAscending) {
  std::vector<PeerInfo> p = {peer(0, "b"), peer(1, "a"), peer(2, "b"), peer(3, "c"), peer(4, "a"), peer(5, "b")};
  Topology t = buildTopology(p);
  ASSERT_EQ(t.ngroups(), 3);
  EXPECT_EQ(t.groups[0].name, "b");
  EXPECT_EQ(t.groups[1].name, "a");
  EXPECT_EQ(t.groups[2].name, "c");
  EXPECT_EQ(t.groups[0].ranks, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(t.groups[1].ranks, (std::vector<int>{1, 4}));
  EXPECT_EQ(t.groups[2].ranks, (std::vector<int>{3}));
  EXPECT_EQ(t.groupOf, (std::vector<int>{0, 1, 0, 2, 1, 0}));
  EXPECT_EQ(t.groupRank, (std::vector<int>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(t.groups[0].deviceKind, "host");
  EXPECT_EQ(t.groupOfRank(4).name, "a");
  EXPECT_TRUE(t.singleHost);
  EXPECT_EQ(describeTopology(t), "group b (host): ranks 0,2,5\ngroup a (host): ranks 1,4\ngroup c (host): ranks 3\n");
}

TEST(BuildTopology, DeviceKindsAndHosts) {
  Topology t = buildTopology({peer(0, "x", "cuda", 1), peer(1, "y", "hip", 2), peer(2, "x", "cuda", 2)});
  EXPECT_EQ(t.groups[0].deviceKind, "cuda");
  EXPECT_EQ(t.groups[1].deviceKind, "hip");
  EXPECT_FALSE(t.singleHost);
  EXPECT_HETCCL_ERROR(buildTopology({peer(0, "x", "cuda"), peer(1, "x", "hip")}), hetcclInvalidUsage, "mixes");
  EXPECT_HETCCL_ERROR(buildTopology({peer(0, "x", "host"), peer(1, "y", "cuda"), peer(2, "x", "cuda")}),
                      hetcclInvalidUsage, "group 'x'");
  std::vector<PeerInfo> many;
  for (int r = 0; r <= HETCCL_MAX_GROUPS; ++r) many.push_back(peer(r, ("g" + std::to_string(r)).c_str()));
  EXPECT_HETCCL_ERROR(buildTopology(many), hetcclInvalidUsage, "groups");
  many.pop_back();
  EXPECT_EQ(buildTopology(many).ngroups(), HETCCL_MAX_GROUPS);
}

TEST(PeerInfo, SerializeRoundTripAndChecks) {
  PeerInfo p = peer(3, "grp", "cuda", 77);
  p.deviceIndex = 2;
  PeerInfo q = PeerInfo::deserialize(p.serialize(), 3);
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.hostHash, 77u);
  EXPECT_STREQ(q.group, "grp");
  EXPECT_STREQ(q.deviceKind, "cuda");
  EXPECT_EQ(q.deviceIndex, 2);
  EXPECT_HETCCL_ERROR(PeerInfo::deserialize(p.serialize(), 4), hetcclRemoteError, "rank 4");
  auto shortRec = p.serialize();
  shortRec.pop_back();
  EXPECT_HETCCL_ERROR(PeerInfo::deserialize(shortRec, 3), hetcclRemoteError, "bytes");
  PeerInfo bad = p;
  memset(bad.group, 'x', sizeof(bad.group));  // no terminator
  EXPECT_HETCCL_ERROR(PeerInfo::deserialize(bad.serialize(), 3), hetcclRemoteError, "malformed");
  EXPECT_EQ(localHostHash(), localHostHash());
  EXPECT_FALSE(localHostName().empty());
}

// ---- border assignment ----

TEST(ShardLayout, ShardsAndTail) {
  ShardLayout l = shardLayout(10, 3, false);
  EXPECT_EQ(l.bounds, (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(l.mainEnd(), 9u);
  EXPECT_TRUE(l.even());
  EXPECT_EQ(l.memberAt(5), 1);
  EXPECT_FALSE(shardLayout(2, 3, false).sharded());
  EXPECT_EQ(shardLayout(3, 3, false).size(2), 1u);
  EXPECT_FALSE(shardLayout(1000, 3, true).sharded());
  EXPECT_EQ(shardLayout(0, 2, false).mainEnd(), 0u);
}

TEST(ShardLayout, WeightedShardsFollowTheWeightsOnAlignedCuts) {
  // 1:4 over 2^20 elements: the first member holds a fifth, cut on a
  // multiple of 64; no tail.
  ShardLayout l = weightedShardLayout(1 << 20, {1, 4}, false);
  ASSERT_EQ(l.bounds.size(), 3u);
  EXPECT_EQ(l.bounds[1], (size_t{1} << 20) / 5 / 64 * 64);
  EXPECT_EQ(l.mainEnd(), size_t{1} << 20);
  EXPECT_FALSE(l.even());
  EXPECT_EQ(l.memberAt(l.bounds[1] - 1), 0);
  EXPECT_EQ(l.memberAt(l.bounds[1]), 1);
  // Three members 16:1:3 of a small vector: cuts on single elements, every
  // shard non-empty.
  ShardLayout s = weightedShardLayout(200, {16, 1, 3}, false);
  EXPECT_EQ(s.bounds, (std::vector<size_t>{0, 160, 170, 200}));
  // Equal weights, the latency plan and small vectors take the size cut.
  EXPECT_EQ(weightedShardLayout(1000, {2, 2}, false).bounds, shardLayout(1000, 2, false).bounds);
  EXPECT_FALSE(weightedShardLayout(1 << 20, {1, 4}, true).sharded());
  EXPECT_EQ(weightedShardLayout(100, {1, 4}, false).bounds, shardLayout(100, 2, false).bounds);
}

struct Msg {
  size_t off, len;
  bool operator==(const Msg& o) const { return off == o.off && len == o.len; }
};
using PairLists = std::map<std::pair<int, int>, std::vector<Msg>>;  // (from, to) -> messages in order

std::string show(const PairLists& m) {
  std::string s;
  for (const auto& [k, v] : m) {
    s += std::to_string(k.first) + "->" + std::to_string(k.second) + ":";
    for (const Msg& x : v) s += " [" + std::to_string(x.off) + "+" + std::to_string(x.len) + "]";
    s += "\n";
  }
  return s;
}

// Checks the assignment of every rank for one layout and count.
// `weight` by rank (the bandwidth cut), or empty (the size cut).
void checkBorder(const std::vector<int>& labels, size_t count, bool latency, const std::vector<double>& weight = {}) {
  SCOPED_TRACE("count " + std::to_string(count) + (latency ? " latency" : "") + (weight.empty() ? "" : " weighted"));
  const Topology t = topoOf(labels);
  const int n = static_cast<int>(labels.size()), G = t.ngroups();
  std::vector<ShardLayout> layouts;
  for (const Group& g : t.groups) {
    std::vector<double> w;
    for (int r : g.ranks) w.push_back(weight.empty() ? 1.0 : weight[r]);
    layouts.push_back(weightedShardLayout(count, w, latency));
  }
  std::vector<BorderAssignment> a;
  for (int r = 0; r < n; ++r) a.push_back(assignBorder(t, layouts, r));

  // Each rank's pieces tile exactly what its group step left it, in order.
  for (int r = 0; r < n; ++r) {
    const ShardLayout& l = layouts[t.groupOf[r]];
    const size_t i = t.groupRank[r];
    std::vector<std::pair<size_t, size_t>> owned;
    if (count > 0 && l.sharded()) owned.emplace_back(l.lo(i), l.lo(i + 1));
    if (count > 0 && l.mainEnd() < count) owned.emplace_back(l.mainEnd(), count);
    std::vector<Msg> pieces;
    for (const auto& p : a[r].split) pieces.push_back({p.offset, p.count});
    for (const auto& p : a[r].shared) pieces.push_back({p.offset, p.count});
    std::sort(pieces.begin(), pieces.end(), [](const Msg& x, const Msg& y) { return x.off < y.off; });
    size_t k = 0;
    for (auto [lo, hi] : owned) {
      size_t at = lo;
      while (at < hi) {
        ASSERT_LT(k, pieces.size()) << "rank " << r << " lacks a piece at " << at;
        ASSERT_EQ(pieces[k].off, at) << "rank " << r << ": gap or overlap";
        ASSERT_GT(pieces[k].len, 0u);
        at += pieces[k++].len;
      }
      EXPECT_EQ(at, hi) << "rank " << r << ": a piece crosses the end of what it holds";
    }
    EXPECT_EQ(k, pieces.size()) << "rank " << r << " has pieces outside what it holds";
    for (size_t j = 1; j < a[r].split.size(); ++j) EXPECT_LT(a[r].split[j - 1].offset, a[r].split[j].offset);
    for (size_t j = 1; j < a[r].shared.size(); ++j) EXPECT_LT(a[r].shared[j - 1].offset, a[r].shared[j].offset);
  }

  // Split pieces: every owner sees the same piece; shared: sources are in the right group.
  for (int r = 0; r < n; ++r) {
    const int g = t.groupOf[r];
    for (const SplitPiece& p : a[r].split) {
      ASSERT_EQ(p.owners.size(), static_cast<size_t>(G));
      EXPECT_EQ(p.owners[g], r);
      for (int h = 0; h < G; ++h) {
        ASSERT_EQ(t.groupOf[p.owners[h]], h);
        const auto& other = a[p.owners[h]].split;
        bool same = std::any_of(other.begin(), other.end(), [&](const SplitPiece& q) {
          return q.offset == p.offset && q.count == p.count && q.owners == p.owners;
        });
        EXPECT_TRUE(same) << "owner " << p.owners[h] << " disagrees about the piece at " << p.offset << " of rank "
                          << r;
      }
    }
    for (const SharedPiece& p : a[r].shared) {
      ASSERT_EQ(p.recvFrom.size(), static_cast<size_t>(G));
      for (int h = 0; h < G; ++h) {
        if (h == g) {
          EXPECT_EQ(p.recvFrom[h], -1);
        } else {
          ASSERT_EQ(t.groupOf[p.recvFrom[h]], h);
        }
      }
      for (int d : p.sendTo) EXPECT_NE(t.groupOf[d], g);
    }
  }

  // Sends from A to B equal the receives B expects from A (per step, in order).
  PairLists rsSend, rsRecv, shSend, shRecv, agSend, agRecv;
  for (int r = 0; r < n; ++r) {
    const int g = t.groupOf[r];
    for (const SplitPiece& p : a[r].split) {
      auto part = [&](int j) { return Msg{p.partLo(j), p.partLo(j + 1) - p.partLo(j)}; };
      for (int h = 0; h < G; ++h) {
        if (h == g) continue;
        if (part(h).len) rsSend[{r, p.owners[h]}].push_back(part(h));
        if (part(g).len) rsRecv[{p.owners[h], r}].push_back(part(g));
        if (part(g).len) agSend[{r, p.owners[h]}].push_back(part(g));
        if (part(h).len) agRecv[{p.owners[h], r}].push_back(part(h));
      }
    }
    for (const SharedPiece& p : a[r].shared) {
      for (int d : p.sendTo) shSend[{r, d}].push_back({p.offset, p.count});
      for (int h = 0; h < G; ++h)
        if (h != g) shRecv[{p.recvFrom[h], r}].push_back({p.offset, p.count});
    }
  }
  EXPECT_TRUE(rsSend == rsRecv) << "reduce-scatter sends:\n" << show(rsSend) << "receives:\n" << show(rsRecv);
  EXPECT_TRUE(shSend == shRecv) << "shared sends:\n" << show(shSend) << "receives:\n" << show(shRecv);
  EXPECT_TRUE(agSend == agRecv) << "allgather sends:\n" << show(agSend) << "receives:\n" << show(agRecv);

  // Peer counts agree with the lists. (A split piece smaller than the number
  // of groups has empty parts: its owners are counted although some pairs
  // of them move no bytes, so then the count may only be larger.)
  for (int r = 0; r < n; ++r) {
    std::set<int> peers;
    for (const PairLists* m : {&rsSend, &rsRecv, &shSend, &shRecv, &agSend, &agRecv})
      for (const auto& [k, v] : *m)
        if (k.first == r || k.second == r) peers.insert(k.first == r ? k.second : k.first);
    bool tiny =
        std::any_of(a[r].split.begin(), a[r].split.end(), [&](const SplitPiece& p) { return p.count < size_t(G); });
    if (tiny) {
      EXPECT_GE(borderPeerCount(a[r], r), static_cast<int>(peers.size())) << "rank " << r;
    } else {
      EXPECT_EQ(borderPeerCount(a[r], r), static_cast<int>(peers.size())) << "rank " << r;
    }
  }

  // Data flow, one representative element per segment between boundaries:
  // step 1 carries each sender's own group partial; step 2 (allgather)
  // replaces with the folded owner's state. Every holder must end with every
  // group's partial exactly once.
  std::set<size_t> cuts{0, count};
  for (const PairLists* m : {&rsRecv, &shRecv, &agRecv})
    for (const auto& [k, v] : *m)
      for (const Msg& x : v) cuts.insert({x.off, x.off + x.len});
  for (int r = 0; r < n; ++r)
    for (const auto& p : a[r].shared) cuts.insert({p.offset, p.offset + p.count});
  auto covers = [](const Msg& x, size_t e) { return x.off <= e && e < x.off + x.len; };
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    const size_t e = *it;
    std::vector<std::vector<int>> st(n, std::vector<int>(G, 0));
    std::vector<bool> holds(n, false);
    std::vector<int> perGroup(G, 0);
    for (int r = 0; r < n; ++r) {
      for (const auto& p : a[r].split) holds[r] = holds[r] || covers({p.offset, p.count}, e);
      for (const auto& p : a[r].shared) holds[r] = holds[r] || covers({p.offset, p.count}, e);
      if (holds[r]) st[r][t.groupOf[r]] = 1, ++perGroup[t.groupOf[r]];
    }
    for (int h = 0; h < G; ++h) ASSERT_GE(perGroup[h], 1) << "group " << h << " holds nothing at " << e;
    auto mid = st;
    for (const PairLists* m : {&rsRecv, &shRecv})
      for (const auto& [k, v] : *m)
        for (const Msg& x : v)
          if (covers(x, e)) {
            ASSERT_TRUE(holds[k.first] && holds[k.second]) << k.first << "->" << k.second << " at " << e;
            for (int h = 0; h < G; ++h) mid[k.second][h] += st[k.first][h];
          }
    auto fin = mid;
    std::vector<int> gathered(n, 0);
    for (const auto& [k, v] : agRecv)
      for (const Msg& x : v)
        if (covers(x, e)) fin[k.second] = mid[k.first], ++gathered[k.second];
    for (int r = 0; r < n; ++r) {
      if (!holds[r]) continue;
      EXPECT_LE(gathered[r], 1) << "rank " << r << " at " << e;
      EXPECT_EQ(fin[r], std::vector<int>(G, 1)) << "rank " << r << " at element " << e;
    }
  }
}

struct BorderCase {
  const char* name;
  std::vector<int> labels;
};

class Border : public ::testing::TestWithParam<BorderCase> {};

TEST_P(Border, EveryCountFromEveryRanksView) {
  for (bool latency : {false, true})
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7}, size_t{1000}, size_t{1000003}})
      checkBorder(GetParam().labels, count, latency);
}

TEST_P(Border, BandwidthCutFromEveryRanksView) {
  // Weights as borderWeights makes them (whole sixteenths), unequal inside
  // every group: pieces cut at two sets of unaligned boundaries.
  const std::vector<int>& labels = GetParam().labels;
  std::vector<double> w;
  for (size_t r = 0; r < labels.size(); ++r) w.push_back(1 + static_cast<double>((r * 7 + 3) % 16));
  for (size_t count : {size_t{7}, size_t{1000}, size_t{4099}, size_t{1000003}}) checkBorder(labels, count, false, w);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Border,
                         ::testing::Values(BorderCase{"g1_1", {0, 1}}, BorderCase{"g2_2", {0, 0, 1, 1}},
                                           BorderCase{"g3_1", {0, 0, 0, 1}}, BorderCase{"g1_3", {0, 1, 1, 1}},
                                           BorderCase{"g1_1_2", {0, 1, 2, 2}},
                                           BorderCase{"g3_2_3", {0, 0, 0, 1, 1, 2, 2, 2}},
                                           BorderCase{"interleaved3_3", {0, 1, 0, 1, 1, 0}},
                                           BorderCase{"interleaved2_3", {1, 0, 0, 1, 1}},
                                           BorderCase{"interleaved3_2_3", {0, 1, 2, 0, 2, 2, 1, 0}},
                                           BorderCase{"g4_3_2_1", {0, 0, 0, 0, 1, 1, 1, 2, 2, 3}}),
                         [](const auto& i) { return std::string(i.param.name); });

TEST(Border, OneGroupHasNoBorder) {
  Topology t = topoOf({0, 0, 0});
  std::vector<ShardLayout> l = {shardLayout(100, 3, false)};
  for (int r = 0; r < 3; ++r) {
    BorderAssignment a = assignBorder(t, l, r);
    EXPECT_TRUE(a.split.empty() && a.shared.empty());
    EXPECT_EQ(borderPeerCount(a, r), 0);
  }
}

TEST(Border, TwoEqualGroupsPairShardOwners) {
  Topology t = topoOf({0, 1, 0, 1});  // groups {0,2} and {1,3}
  std::vector<ShardLayout> l = {shardLayout(1000, 2, false), shardLayout(1000, 2, false)};
  BorderAssignment a = assignBorder(t, l, 2);
  ASSERT_EQ(a.split.size(), 1u);
  EXPECT_TRUE(a.shared.empty());
  EXPECT_EQ(a.split[0].offset, 500u);
  EXPECT_EQ(a.split[0].count, 500u);
  EXPECT_EQ(a.split[0].owners, (std::vector<int>{2, 3}));
  EXPECT_EQ(a.split[0].partLo(1), 750u);
  EXPECT_EQ(borderPeerCount(a, 2), 1);
}

TEST(Border, PartsFollowGroupSizesSoEveryOwnerFoldsItsShare) {
  // Three ranks in group 0, one in group 1: the lone rank owns all of the
  // vector, so it folds a quarter of each piece and the others three quarters
  // of theirs: 300 elements each of 1200.
  Topology t = topoOf({0, 0, 0, 1});
  std::vector<ShardLayout> l = {shardLayout(1200, 3, false), shardLayout(1200, 1, false)};
  std::vector<size_t> folded(4, 0);
  for (int r = 0; r < 4; ++r) {
    BorderAssignment a = assignBorder(t, l, r);
    for (const SplitPiece& p : a.split) {
      const int g = t.groupOf[r];
      EXPECT_EQ(p.weight, (std::vector<size_t>{3, 1}));
      folded[r] += p.partLo(g + 1) - p.partLo(g);
    }
  }
  EXPECT_EQ(folded, (std::vector<size_t>{300, 300, 300, 300}));
  BorderAssignment a = assignBorder(t, l, 1);
  ASSERT_EQ(a.split.size(), 1u);
  EXPECT_EQ(a.split[0].partLo(0), 400u);
  EXPECT_EQ(a.split[0].partLo(1), 700u);
  EXPECT_EQ(a.split[0].partLo(2), 800u);
}

}  // namespace
}  // namespace hetccl
