#include "topology/groups.h"

#include <cstring>
#include <map>
#include <sstream>

#include "core/config.h"
#include "core/error.h"

namespace hetccl {

std::string groupFromMap(const std::string& map, int rank) {
  // The whole map is checked on every rank, so a bad map fails everywhere
  // at once instead of leaving the ranks it names waiting for the others.
  std::string found;
  std::stringstream ss(map);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      throwError(hetcclInvalidArgument, "HETCCL_GROUP_MAP: '" + item + "' is not <ranks>:<name>");
    std::string range = item.substr(0, colon), name = item.substr(colon + 1);
    size_t dash = range.find('-');
    int64_t lo = parseInt(range.substr(0, dash), "HETCCL_GROUP_MAP rank");
    int64_t hi = dash == std::string::npos ? lo : parseInt(range.substr(dash + 1), "HETCCL_GROUP_MAP rank");
    if (lo < 0 || hi < lo) throwError(hetcclInvalidArgument, "HETCCL_GROUP_MAP: bad rank range '" + range + "'");
    if (found.empty() && rank >= lo && rank <= hi) found = name;
  }
  return found;
}

std::string resolveGroupName(int rank, const std::string& deviceKind, const char* configName) {
  std::string name;
  if (configName && *configName) name = configName;
  else if (config().isSet("HETCCL_GROUP")) name = config().getString("HETCCL_GROUP");
  else if (config().isSet("HETCCL_GROUP_MAP")) {
    name = groupFromMap(config().getString("HETCCL_GROUP_MAP"), rank);
    if (name.empty())
      throwError(hetcclInvalidArgument, "HETCCL_GROUP_MAP does not name rank " + std::to_string(rank));
  } else {
    name = deviceKind;
  }
  if (name.size() >= sizeof(PeerInfo{}.group))
    throwError(hetcclInvalidArgument, "group name '" + name + "' is longer than 31 characters");
  return name;
}

Topology buildTopology(const std::vector<PeerInfo>& peers) {
  Topology t;
  int n = static_cast<int>(peers.size());
  t.groupOf.assign(n, -1);
  t.localIndex.assign(n, -1);
  std::map<std::string, int> index;
  for (int r = 0; r < n; ++r) {
    std::string name = peers[r].group;
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, static_cast<int>(t.groups.size())).first;
      t.groups.push_back(Group{name, peers[r].deviceKind, {}});
    }
    Group& g = t.groups[it->second];
    if (g.deviceKind != peers[r].deviceKind)
      throwError(hetcclInvalidUsage, "group '" + name + "' mixes device kinds " + g.deviceKind + " (rank " +
                                         std::to_string(g.ranks[0]) + ") and " + peers[r].deviceKind + " (rank " +
                                         std::to_string(r) + "); a group shares one vendor library");
    t.groupOf[r] = it->second;
    t.localIndex[r] = static_cast<int>(g.ranks.size());
    g.ranks.push_back(r);
    if (peers[r].hostHash != peers[0].hostHash) t.singleHost = false;
  }
  if (t.groups.size() > HETCCL_MAX_GROUPS)
    throwError(hetcclInvalidUsage, "more than " + std::to_string(HETCCL_MAX_GROUPS) + " groups");
  return t;
}

std::string describeTopology(const Topology& t) {
  std::string out;
  for (const Group& g : t.groups) {
    out += "group " + g.name + " (" + g.deviceKind + "): ranks ";
    for (size_t i = 0; i < g.ranks.size(); ++i) out += (i ? "," : "") + std::to_string(g.ranks[i]);
    out += "\n";
  }
  return out;
}

}  // namespace hetccl
