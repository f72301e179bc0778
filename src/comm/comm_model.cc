#include "comm/comm_model.h"

#include <algorithm>
#include <map>

namespace hetccl {

model::Cluster clusterOf(const Topology& t, const std::vector<PeerInfo>& peers, const BorderCut& cut) {
  model::Cluster c;
  c.borderCut = cut.weight.empty() ? "size" : "bandwidth";
  for (const Group& g : t.groups) {
    model::Vendor v;
    v.device = g.deviceKind != "host";
    v.intra = v.device ? model::Link{kGpuIntraGbps, kGpuIntraUs} : model::Link{kShmGbps, kShmLatencyUs};
    v.hostCopy = {kGpuCopyGbps, kGpuCopyUs};
    c.vendors[g.name] = v;
  }
  const int n = static_cast<int>(peers.size());
  std::map<uint64_t, int> hostIndex;
  std::vector<int> hostOf(n);
  for (int r = 0; r < n; ++r) {
    auto [it, added] = hostIndex.emplace(peers[r].hostHash, static_cast<int>(c.hosts.size()));
    if (added) {
      model::Host h;
      h.name = peers[r].hostname;
      h.site = peers[r].site;
      h.nic = {100, 20};  // where no rank of the host crosses hosts at the border
      c.hosts.push_back(h);
    }
    hostOf[r] = it->second;
    auto& ranks = c.hosts[it->second].ranks;
    const std::string& group = t.groupOfRank(r).name;
    auto v = std::find_if(ranks.begin(), ranks.end(), [&](const auto& p) { return p.first == group; });
    if (v == ranks.end())
      ranks.emplace_back(group, 1);
    else
      ++v->second;
  }
  // A host's NIC: what its ranks whose border peers are on other hosts
  // measured (or were given) together, at the slowest latency among them.
  std::vector<double> gbps(c.hosts.size(), 0), lat(c.hosts.size(), 0);
  for (int r = 0; r < n && !cut.gbps.empty(); ++r) {
    bool crosses = false;
    for (int p : sizeCutBorderPeers(t, r)) crosses = crosses || hostOf[p] != hostOf[r];
    if (!crosses) continue;
    gbps[hostOf[r]] += cut.gbps[r];
    if (r < static_cast<int>(cut.latencyUs.size())) lat[hostOf[r]] = std::max(lat[hostOf[r]], cut.latencyUs[r]);
  }
  for (size_t h = 0; h < c.hosts.size(); ++h)
    if (gbps[h] > 0) c.hosts[h].nic = {gbps[h], lat[h]};
  return c;
}

size_t modelSmallBytes(const Topology& t, const std::vector<PeerInfo>& peers, const BorderCut& cut) {
  if (cut.weight.empty() || t.ngroups() < 2) return 0;
  const double s = model::Model(clusterOf(t, peers, cut)).smallBytes();
  return static_cast<size_t>(std::min(s, 64.0 * 1024 * 1024));
}

}  // namespace hetccl
