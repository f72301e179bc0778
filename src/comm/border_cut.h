// How AllReduce across groups cuts the vector among each group's ranks, and
// so how much each border link carries (HETCCL_BORDER_CUT).
//
// The size cut gives every rank of a group an equal shard; each shard
// crosses the border between its owners, so the slowest border link sets
// the time. The bandwidth cut gives each rank a shard in proportion to its
// border link's rate: from HETCCL_LINK_GBPS where every rank has a rate,
// else measured at init by a short exchange with its border peers (the
// ranks it pairs with under the size cut), twice, the second timed; the
// latency of the same links by a few 8-byte exchanges.
//
// A link is as fast as its slower end: a rank's rate is the lowest of its
// own and its border peers'. Rates become weights in steps of 1/16 of the
// fastest rank of the group (at least 1/16), so that both ends of a link,
// and every rank, compute the same shards from slightly different timings.
#pragma once

#include <string>
#include <vector>

#include "topology/groups.h"

namespace hetccl {

class Bootstrap;
class Transport;

struct BorderCut {
  std::string mode = "size";      // size | bandwidth
  std::string source;             // bandwidth: "HETCCL_LINK_GBPS" or "probe"
  std::vector<double> gbps;       // bandwidth: by rank, its rate (Gbit/s) as given or measured
  std::vector<double> latencyUs;  // bandwidth: by rank, its border latency (us), measured at init
  std::vector<double> weight;     // bandwidth: by rank, its share weight; empty: the size cut
  std::string describe() const;   // one line for the INFO log and hetccl-info
};

// This rank's HETCCL_LINK_GBPS (a number, or a map by launcher rank), 0
// where unset or the map does not name it. Throws InvalidArgument on a
// value that is not a positive number.
double linkGbpsHint(int rank);

// The ranks `rank` exchanges border data with in a large AllReduce under the
// size cut.
std::vector<int> sizeCutBorderPeers(const Topology& topo, int rank);

// Weights from rates (see above); `gbps` by rank, 0 = unknown (counts as
// the fastest).
std::vector<double> borderWeights(const Topology& topo, const std::vector<double>& gbps);

// Collective over every rank: HETCCL_BORDER_CUT's mode (already agreed),
// hints shared over the bootstrap, or a probe over `t` (messages tagged as
// call 0, which no collective uses).
BorderCut planBorderCut(const std::string& mode, const Topology& topo, int rank, Bootstrap& b, Transport& t,
                        size_t probeBytes);

}  // namespace hetccl
