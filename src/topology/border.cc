#include "topology/border.h"

#include <algorithm>
#include <set>

namespace hetccl {

bool ShardLayout::even() const {
  for (int i = 1; i < k && sharded(); ++i)
    if (size(i) != size(0)) return false;
  return true;
}

int ShardLayout::memberAt(size_t at) const {
  return static_cast<int>(std::upper_bound(bounds.begin(), bounds.end(), at) - bounds.begin()) - 1;
}

ShardLayout shardLayout(size_t count, int k, bool latency) {
  ShardLayout l;
  l.count = count;
  l.k = k;
  const size_t uk = static_cast<size_t>(k);
  if (latency || count < uk) return l;
  for (size_t i = 0; i <= uk; ++i) l.bounds.push_back(count / uk * i);
  return l;
}

ShardLayout weightedShardLayout(size_t count, const std::vector<double>& weight, bool latency) {
  const int k = static_cast<int>(weight.size());
  const size_t uk = weight.size();
  const bool equal = std::all_of(weight.begin(), weight.end(), [&](double w) { return w == weight[0]; });
  if (equal || latency || count < 64 * uk) return shardLayout(count, k, latency);
  double total = 0;
  for (double w : weight) total += w;
  // Cuts on 64-element boundaries keep large shards aligned for the vendor
  // steps; every weight is at least 1/16 of the largest (HETCCL_BORDER_CUT),
  // so every shard keeps elements.
  const size_t align = count / uk >= 4096 ? 64 : 1;
  ShardLayout l;
  l.count = count;
  l.k = k;
  l.bounds.push_back(0);
  double below = 0;
  for (int i = 1; i < k; ++i) {
    below += weight[i - 1];
    size_t b = static_cast<size_t>(static_cast<double>(count) * below / total) / align * align;
    l.bounds.push_back(std::max(b, l.bounds.back() + 1));
  }
  if (l.bounds.back() >= count) return shardLayout(count, k, latency);  // weights out of range: the size cut
  l.bounds.push_back(count);
  return l;
}

namespace {

// The members of group h holding its partial of the piece starting at `at`.
std::vector<int> holders(const Group& grp, const ShardLayout& l, size_t at) {
  if (at < l.mainEnd()) return {grp.ranks[l.memberAt(at)]};
  return grp.ranks;
}

}  // namespace

BorderAssignment assignBorder(const Topology& topo, const std::vector<ShardLayout>& layouts, int rank) {
  BorderAssignment out;
  const int g = topo.groupOf[rank], i = topo.groupRank[rank], G = topo.ngroups();
  const size_t n = layouts[g].count;
  if (n == 0 || G < 2) return out;

  std::set<size_t> cuts{0, n};
  for (int h = 0; h < G; ++h) {
    const ShardLayout& l = layouts[h];
    for (size_t b : l.bounds)
      if (b > 0) cuts.insert(b);
  }
  const ShardLayout& mine = layouts[g];
  std::vector<std::pair<size_t, size_t>> owned;
  if (mine.sharded()) owned.emplace_back(mine.lo(i), mine.lo(i + 1));
  if (mine.mainEnd() < n) owned.emplace_back(mine.mainEnd(), n);

  for (auto [lo, hi] : owned) {
    for (auto it = cuts.upper_bound(lo); lo < hi; ++it) {
      size_t b = std::min(*it, hi);
      std::vector<std::vector<int>> own(G);
      bool allSingle = true;
      for (int h = 0; h < G; ++h) {
        own[h] = holders(topo.groups[h], layouts[h], lo);
        allSingle = allSingle && own[h].size() == 1;
      }
      if (allSingle) {
        SplitPiece p;
        p.offset = lo;
        p.count = b - lo;
        for (int h = 0; h < G; ++h) {
          p.owners.push_back(own[h][0]);
          p.weight.push_back(topo.groups[h].ranks.size());
        }
        out.split.push_back(std::move(p));
      } else {
        SharedPiece p;
        p.offset = lo;
        p.count = b - lo;
        size_t myIdx = std::find(own[g].begin(), own[g].end(), rank) - own[g].begin();
        p.recvFrom.assign(G, -1);
        for (int h = 0; h < G; ++h) {
          if (h == g) continue;
          p.recvFrom[h] = own[h][myIdx % own[h].size()];
          for (size_t jq = 0; jq < own[h].size(); ++jq)
            if (own[g][jq % own[g].size()] == rank) p.sendTo.push_back(own[h][jq]);
        }
        out.shared.push_back(std::move(p));
      }
      lo = b;
    }
  }
  return out;
}

std::vector<int> borderPeers(const BorderAssignment& a, int rank) {
  std::set<int> peers;
  for (const auto& p : a.split)
    for (int o : p.owners)
      if (o != rank) peers.insert(o);
  for (const auto& p : a.shared) {
    for (int r : p.recvFrom)
      if (r >= 0) peers.insert(r);
    peers.insert(p.sendTo.begin(), p.sendTo.end());
  }
  return {peers.begin(), peers.end()};
}

int borderPeerCount(const BorderAssignment& a, int rank) { return static_cast<int>(borderPeers(a, rank).size()); }

std::vector<int> largeAllReduceBorderPeerList(const Topology& t, int rank) {
  std::vector<ShardLayout> layouts;
  for (const Group& g : t.groups) layouts.push_back(shardLayout(1 << 24, static_cast<int>(g.ranks.size()), false));
  return borderPeers(assignBorder(t, layouts, rank), rank);
}

int largeAllReduceBorderPeers(const Topology& t, int rank) {
  return static_cast<int>(largeAllReduceBorderPeerList(t, rank).size());
}

}  // namespace hetccl
