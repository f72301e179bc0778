// Border assignment for reductions across groups.
//
// After the group step each group holds its partial of [0, count) laid out
// by a ShardLayout: shards [bounds[i], bounds[i+1]) owned by member i, and a
// tail [bounds[k], count) that every member holds (no bounds put the whole
// vector in the tail: the latency plan for small messages). Shards are equal
// (the size cut) or in proportion to the members' border link bandwidth
// (the bandwidth cut, HETCCL_BORDER_CUT=bandwidth: no tail).
//
// The border cuts [0, count) at the union of every group's boundaries.
// A piece whose owner is a single rank in every group is a SplitPiece: its
// G owners reduce-scatter it among themselves (part j, in proportion to
// group j's size, is folded by group j's owner) and then allgather the
// parts; every group's partial crosses each border once. Any other piece is a SharedPiece: each holder receives every
// other group's partial from one holder of that group and folds all G
// partials in group order itself.
//
// Both sides of every transfer compute the same pieces from the same
// topology, and lists are sorted by offset, so transfers match in order.
#pragma once

#include <cstddef>
#include <vector>

#include "topology/groups.h"

namespace hetccl {

struct ShardLayout {
  size_t count = 0;
  int k = 1;
  std::vector<size_t> bounds;  // k + 1 ascending offsets; empty: no shards, all tail
  bool sharded() const { return !bounds.empty(); }
  size_t mainEnd() const { return sharded() ? bounds.back() : 0; }
  size_t lo(int i) const { return bounds[i]; }
  size_t size(int i) const { return bounds[i + 1] - bounds[i]; }
  // Every shard the same size (a vendor ReduceScatter/AllGather runs it).
  bool even() const;
  // The member whose shard holds element `at` (< mainEnd()).
  int memberAt(size_t at) const;
};

// Equal shards of count / k (the tail takes the rest), or none when
// `latency` (small messages) or count < k.
ShardLayout shardLayout(size_t count, int k, bool latency);
// Shards in proportion to `weight` (one per member, > 0), cut at multiples
// of 64 elements where shards are large, the last ending at count. Equal
// weights, `latency`, or fewer than 64 elements a member give shardLayout().
ShardLayout weightedShardLayout(size_t count, const std::vector<double>& weight, bool latency);

struct SplitPiece {
  size_t offset = 0, count = 0;
  std::vector<int> owners;     // by group index: the global rank holding that group's partial
  std::vector<size_t> weight;  // by group index: that group's size
  // Part j of the piece, [partLo(j), partLo(j+1)), is folded by owners[j].
  // Parts are in proportion to the groups' sizes: an owner in a group of k
  // ranks holds 1/k of the vector, so every owner folds about count/n
  // elements in all (n ranks), however unequal the groups are.
  size_t partLo(int j) const {
    size_t below = 0, all = 0;
    for (size_t h = 0; h < weight.size(); ++h) (h < static_cast<size_t>(j) ? below : all) += weight[h];
    return offset + count * below / (all + below);
  }
};

struct SharedPiece {
  size_t offset = 0, count = 0;
  std::vector<int> recvFrom;  // by group index: the rank this rank receives from; -1 for its own group
  std::vector<int> sendTo;    // ranks of other groups that receive this rank's partial
};

struct BorderAssignment {
  std::vector<SplitPiece> split;
  std::vector<SharedPiece> shared;
};

// The pieces that `rank` takes part in (sorted by offset).
BorderAssignment assignBorder(const Topology& topo, const std::vector<ShardLayout>& layouts, int rank);

// Ranks of other groups that `rank` exchanges data with, ascending, and
// how many (for hetcclCommGetInfo).
std::vector<int> borderPeers(const BorderAssignment& a, int rank);
int borderPeerCount(const BorderAssignment& a, int rank);

// The ranks of other groups `rank` exchanges with in a large AllReduce
// under the size cut, and how many (hetcclCommGetInfo's borderPeers).
std::vector<int> largeAllReduceBorderPeerList(const Topology& t, int rank);
int largeAllReduceBorderPeers(const Topology& t, int rank);

}  // namespace hetccl
