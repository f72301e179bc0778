// The cost model (model/cost_model.h) of this communicator, and the choice
// the library takes from it at init: the size from which AllReduce across
// groups takes the bandwidth plan (HETCCL_SMALL_BYTES, where unset).
//
// Built from what every rank knows alike, so every rank chooses alike:
// hosts and sites from the peer records, groups and their device kinds,
// and each rank's border link rate and latency as the bandwidth cut
// measured or was given them (HETCCL_BORDER_CUT=bandwidth; without those
// rates the model has nothing to go on and the setting's default stands).
// Inside a host it assumes the defaults below (kShm*, kGpu*).
#pragma once

#include <cstddef>
#include <vector>

#include "comm/border_cut.h"
#include "model/cost_model.h"
#include "topology/groups.h"
#include "topology/peer.h"

namespace hetccl {

inline constexpr double kShmGbps = 80, kShmLatencyUs = 2;       // CPU ranks on one host
inline constexpr double kGpuIntraGbps = 1000, kGpuIntraUs = 5;  // a vendor library inside a host
inline constexpr double kGpuCopyGbps = 200, kGpuCopyUs = 10;    // device <-> pinned host memory

// The cluster as the model sees it; ranks host by host, in rank order.
model::Cluster clusterOf(const Topology& t, const std::vector<PeerInfo>& peers, const BorderCut& cut);

// The bandwidth plan's threshold for this communicator (bytes), or 0 where
// the model has no rates (the size cut).
size_t modelSmallBytes(const Topology& t, const std::vector<PeerInfo>& peers, const BorderCut& cut);

}  // namespace hetccl
