// Group formation: which ranks share one vendor library communicator.
// A rank's group name comes from (first that is set) the config's groupName,
// HETCCL_GROUP, HETCCL_GROUP_MAP, else its device kind. Groups are ordered by
// their lowest global rank; ranks inside a group by global rank, so every
// rank computes the same topology from the same records.
#pragma once

#include <string>
#include <vector>

#include "topology/peer.h"

namespace hetccl {

struct Group {
  std::string name;
  std::string deviceKind;
  std::vector<int> ranks;  // global ranks, ascending
};

struct Topology {
  std::vector<Group> groups;
  std::vector<int> groupOf;    // by global rank
  std::vector<int> groupRank;  // by global rank: its rank inside its group
  bool singleHost = true;

  int ngroups() const { return static_cast<int>(groups.size()); }
  const Group& groupOfRank(int r) const { return groups[groupOf[r]]; }
};

// Parses "0-1:a,2-3:b,4:c" and returns the name for `rank`, or "" if the map
// does not name it. Throws InvalidArgument on a malformed map or ranges
// that overlap.
std::string groupFromMap(const std::string& map, int rank, const std::string& var = "HETCCL_GROUP_MAP");
// Throws InvalidArgument unless the map names every rank of [0, nranks)
// and no other.
void checkMapCovers(const std::string& map, int nranks, const std::string& var = "HETCCL_GROUP_MAP");
// This rank's group name (see above). Throws InvalidArgument on a bad name
// or a map that does not name every rank of `nranks` once.
std::string resolveGroupName(int rank, int nranks, const std::string& deviceKind, const char* configName);
// This rank's site: HETCCL_SITE, else HETCCL_SITE_MAP, else "" (one site).
std::string resolveSiteName(int rank, int nranks);
// Throws InvalidUsage when one group mixes device kinds.
Topology buildTopology(const std::vector<PeerInfo>& peers);
// One line per group: "group a (host): ranks 0,1".
std::string describeTopology(const Topology& t);

}  // namespace hetccl
