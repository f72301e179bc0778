#include "comm/border_cut.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "model/cost_model.h"
#include "topology/border.h"
#include "transport/transport.h"

namespace hetccl {
namespace {

double parseGbps(const std::string& text, const std::string& what) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0)
    throwError(hetcclInvalidArgument,
               what + " '" + text + "' is not a positive rate in Gbit/s (e.g. 100, or 0-3:400,4-7:100 by rank)");
  return v;
}

// One exchange of `bytes` with every peer at once; its seconds.
double exchange(Transport& t, const std::vector<int>& peers, size_t bytes, std::vector<uint8_t>& out,
                std::vector<uint8_t>& in) {
  MsgTag tag;
  tag.seq = 0;  // no collective has sequence number 0
  tag.coll = static_cast<uint16_t>(CollKind::kSendRecv);
  tag.count = bytes;
  std::vector<Xfer> x;
  for (size_t k = 0; k < peers.size(); ++k) {
    x.push_back(Xfer::send(peers[k], out.data(), bytes, tag));
    x.push_back(Xfer::recv(peers[k], in.data() + k * bytes, bytes, tag));
  }
  auto t0 = std::chrono::steady_clock::now();
  t.run(x);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The latency (us: the fastest of five 8-byte exchanges, after one that
// opens the connections) and, unless `bytes` is 0, the rate (Gbit/s per
// direction: `bytes` exchanged twice, the second timed) to the peers.
std::pair<double, double> probe(Transport& t, const std::vector<int>& peers, size_t bytes) {
  if (peers.empty()) return {0, 0};
  std::vector<uint8_t> out(std::max<size_t>(bytes, 8), 0x5a), in(std::max<size_t>(bytes, 8) * peers.size());
  double lat = 1e9;
  for (int round = 0; round < 6; ++round) {
    double s = exchange(t, peers, 8, out, in);
    if (round > 0) lat = std::min(lat, s * 1e6);
  }
  if (bytes == 0) return {lat, 0};
  double seconds = 0;
  for (int round = 0; round < 2; ++round) seconds = exchange(t, peers, bytes, out, in);
  return {lat, static_cast<double>(bytes * peers.size()) * 8 / std::max(seconds, 1e-9) / 1e9};
}

}  // namespace

double linkGbpsHint(int rank) {
  if (!settings::kLinkGbps.isSet()) return 0;
  const std::string v = settings::kLinkGbps.get();
  if (v.find(':') == std::string::npos) return parseGbps(v, "HETCCL_LINK_GBPS");
  auto [jobRank, jobSize] = launcherRank();
  (void)jobSize;
  if (jobRank < 0) jobRank = rank;
  std::string mine = groupFromMap(v, jobRank, "HETCCL_LINK_GBPS");
  return mine.empty() ? 0 : parseGbps(mine, "HETCCL_LINK_GBPS for rank " + std::to_string(jobRank));
}

std::vector<int> sizeCutBorderPeers(const Topology& topo, int rank) { return largeAllReduceBorderPeerList(topo, rank); }

std::vector<double> borderWeights(const Topology& topo, const std::vector<double>& gbps) {
  const int n = static_cast<int>(gbps.size());
  double top = 0;
  for (double g : gbps) top = std::max(top, g);
  auto known = [&](double g) { return g > 0 ? g : top; };
  std::vector<double> link(n);
  for (int r = 0; r < n; ++r) {
    link[r] = known(gbps[r]);
    for (int p : sizeCutBorderPeers(topo, r)) link[r] = std::min(link[r], known(gbps[p]));
  }
  std::vector<double> w(n, 1);
  for (const Group& g : topo.groups) {
    std::vector<double> rates;
    for (int r : g.ranks) rates.push_back(link[r]);
    const std::vector<double> mine = model::sixteenths(rates);
    for (size_t i = 0; i < g.ranks.size(); ++i) w[g.ranks[i]] = mine[i];
  }
  return w;
}

std::string BorderCut::describe() const {
  if (weight.empty()) return "border cut: size (equal shards)";
  char line[160];
  std::string s = "border cut: bandwidth (rates from " + source + "):";
  const size_t shown = std::min<size_t>(gbps.size(), 16);
  for (size_t r = 0; r < shown; ++r) {
    snprintf(line, sizeof(line), "%s rank %zu %.3g Gb/s weight %.0f/16", r ? "," : "", r, gbps[r], weight[r]);
    s += line;
  }
  if (shown < gbps.size()) s += ", ... (" + std::to_string(gbps.size()) + " ranks)";
  return s;
}

BorderCut planBorderCut(const std::string& mode, const Topology& topo, int rank, Bootstrap& b, Transport& t,
                        size_t probeBytes) {
  BorderCut cut;
  cut.mode = mode;
  if (mode != "bandwidth" || topo.ngroups() < 2) return cut;
  const int n = static_cast<int>(topo.groupOf.size());
  std::vector<double> rate(n, 0);
  rate[rank] = linkGbpsHint(rank);
  b.allGather(rate.data(), sizeof(double));
  const bool hinted = std::all_of(rate.begin(), rate.end(), [](double g) { return g > 0; });
  cut.source = hinted ? "HETCCL_LINK_GBPS" : "probe";
  // Each rank's latency, and its rate where not given: {latency, rate}.
  std::vector<double> both(2 * static_cast<size_t>(n), 0);
  auto [lat, measured] = probe(t, sizeCutBorderPeers(topo, rank), hinted ? 0 : probeBytes);
  both[2 * rank] = lat;
  both[2 * rank + 1] = hinted ? rate[rank] : measured;
  b.allGather(both.data(), 2 * sizeof(double));
  for (int r = 0; r < n; ++r) {
    cut.latencyUs.push_back(both[2 * r]);
    rate[r] = both[2 * r + 1];
  }
  cut.gbps = rate;
  cut.weight = borderWeights(topo, rate);
  return cut;
}

}  // namespace hetccl
