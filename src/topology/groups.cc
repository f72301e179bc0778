#include "topology/groups.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "bootstrap/launcher.h"
#include "core/settings.h"
#include "core/error.h"

namespace hetccl {

namespace {

struct MapItem {
  int64_t lo, hi;
  std::string name, text;
};

// Every item of "0-1:a,2-3:b,4:c", checked: well formed, ranges that do not
// overlap. Throws InvalidArgument naming the map and the item.
std::vector<MapItem> parseMap(const std::string& map, const std::string& var) {
  std::vector<MapItem> items;
  std::stringstream ss(map);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      throwError(hetcclInvalidArgument, var + " '" + map + "': '" + item + "' is not <ranks>:<name>");
    std::string range = item.substr(0, colon), name = item.substr(colon + 1);
    size_t dash = range.find('-');
    int64_t lo = parseInt(range.substr(0, dash), (var + " rank").c_str());
    int64_t hi = dash == std::string::npos ? lo : parseInt(range.substr(dash + 1), (var + " rank").c_str());
    if (lo < 0 || hi < lo) throwError(hetcclInvalidArgument, var + " '" + map + "': bad rank range '" + range + "'");
    for (const MapItem& o : items)
      if (lo <= o.hi && o.lo <= hi)
        throwError(hetcclInvalidArgument, var + " '" + map + "': '" + item + "' and '" + o.text + "' both name rank " +
                                              std::to_string(std::max(lo, o.lo)));
    items.push_back(MapItem{lo, hi, name, item});
  }
  return items;
}

std::string ranksText(const std::vector<int64_t>& r) {
  std::string out;
  for (size_t i = 0; i < r.size() && i < 8; ++i) out += (i ? "," : "") + std::to_string(r[i]);
  if (r.size() > 8) out += ",... (" + std::to_string(r.size()) + " ranks)";
  return out;
}

}  // namespace

std::string groupFromMap(const std::string& map, int rank, const std::string& var) {
  // The whole map is checked on every rank, so a bad map fails everywhere
  // at once instead of leaving the ranks it names waiting for the others.
  for (const MapItem& it : parseMap(map, var))
    if (rank >= it.lo && rank <= it.hi) return it.name;
  return "";
}

void checkMapCovers(const std::string& map, int nranks, const std::string& var) {
  std::vector<MapItem> items = parseMap(map, var);
  std::vector<int64_t> missing, extra;
  for (int r = 0; r < nranks; ++r)
    if (std::none_of(items.begin(), items.end(), [&](const MapItem& i) { return r >= i.lo && r <= i.hi; }))
      missing.push_back(r);
  for (const MapItem& i : items)
    if (i.hi >= nranks) extra.push_back(i.hi);
  if (!missing.empty())
    throwError(hetcclInvalidArgument, var + " '" + map + "' does not name rank" + (missing.size() > 1 ? "s " : " ") +
                                          ranksText(missing) + " of " + std::to_string(nranks) +
                                          " (it must name every rank once)");
  if (!extra.empty())
    throwError(hetcclInvalidArgument, var + " '" + map + "' names rank " + std::to_string(extra[0]) +
                                          " but the communicator has " + std::to_string(nranks) + " ranks");
}

std::string resolveGroupName(int rank, int nranks, const std::string& deviceKind, const char* configName) {
  std::string name;
  if (configName && *configName)
    name = configName;
  else if (settings::kGroup.isSet())
    name = settings::kGroup.get();
  else if (settings::kGroupMap.isSet()) {
    checkMapCovers(settings::kGroupMap.get(), nranks);
    name = groupFromMap(settings::kGroupMap.get(), rank);
  } else {
    name = deviceKind;
  }
  if (name.size() >= sizeof(PeerInfo{}.group))
    throwError(hetcclInvalidArgument, "group name '" + name + "' is longer than 31 characters");
  return name;
}

std::string resolveSiteName(int rank, int nranks) {
  std::string name;
  if (settings::kSite.isSet()) {
    name = settings::kSite.get();
  } else if (settings::kSiteMap.isSet()) {
    // By the launcher's numbering where there is one, so that communicators
    // of some of the job's ranks (torch's new_group) read the same map.
    auto [jobRank, jobSize] = launcherRank();
    if (jobRank < 0) jobRank = rank, jobSize = nranks;
    checkMapCovers(settings::kSiteMap.get(), jobSize, "HETCCL_SITE_MAP");
    name = groupFromMap(settings::kSiteMap.get(), jobRank, "HETCCL_SITE_MAP");
  }
  if (name.size() >= sizeof(PeerInfo{}.site))
    throwError(hetcclInvalidArgument, "site name '" + name + "' is longer than 31 characters");
  return name;
}

Topology buildTopology(const std::vector<PeerInfo>& peers) {
  Topology t;
  int n = static_cast<int>(peers.size());
  t.groupOf.assign(n, -1);
  t.groupRank.assign(n, -1);
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
    t.groupRank[r] = static_cast<int>(g.ranks.size());
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
