#include "model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace hetccl::model {
namespace {

constexpr double kInf = 1e300;

double bps(const Link& l) { return l.gbps > 0 ? l.gbps * 1e9 / 8 : kInf; }
double sec(double us) { return us * 1e-6; }

}  // namespace

std::vector<double> sixteenths(const std::vector<double>& rate) {
  double top = 0;
  for (double r : rate) top = std::max(top, r);
  std::vector<double> w(rate.size(), 16);
  if (top <= 0) return w;
  for (size_t i = 0; i < rate.size(); ++i) w[i] = std::clamp(std::round(16 * rate[i] / top), 1.0, 16.0);
  return w;
}

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "allreduce";
    case Coll::kAllGather: return "allgather";
    case Coll::kReduceScatter: return "reducescatter";
    case Coll::kBroadcast: return "broadcast";
  }
  return "?";
}

bool collFromName(const std::string& name, Coll* out) {
  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast})
    if (name == collName(c)) return *out = c, true;
  return false;
}

Model::Model(Cluster c) : c_(std::move(c)) {
  std::map<std::string, int> groupOf;
  for (size_t h = 0; h < c_.hosts.size(); ++h) {
    for (const auto& [vendor, n] : c_.hosts[h].ranks) {
      if (!c_.vendors.count(vendor))
        throw std::invalid_argument("host " + c_.hosts[h].name + ": vendor '" + vendor + "' is not described");
      auto it = groupOf.find(vendor);
      if (it == groupOf.end()) {
        it = groupOf.emplace(vendor, static_cast<int>(groups_.size())).first;
        groups_.emplace_back();
      }
      for (int i = 0; i < n; ++i) {
        groups_[it->second].push_back(static_cast<int>(rank_.size()));
        rank_.push_back({static_cast<int>(h), vendor, it->second});
      }
    }
  }
  if (rank_.empty()) throw std::invalid_argument("the cluster has no ranks");
}

double Model::hostCopyBps(int r) const {
  const Vendor& v = c_.vendors.at(rank_[r].vendor);
  return v.device ? bps(v.hostCopy) : bps(v.intra);
}

double Model::coreShare(int r) const {
  const Host& h = c_.hosts[rank_[r].host];
  if (c_.vendors.at(rank_[r].vendor).device || h.cores <= 0) return 1;
  int here = 0;
  for (const auto& [vendor, n] : h.ranks)
    if (!c_.vendors.at(vendor).device) here += n;
  return std::min(1.0, h.cores / here);
}

double Model::cpuS(int r, double bytes) const {
  const Vendor& v = c_.vendors.at(rank_[r].vendor);
  if (v.device || v.copyGbps <= 0) return 0;
  return bytes / (v.copyGbps * 1e9 / 8 * coreShare(r));
}

double Model::rateBps(int a, int b, Share s, bool viaHost) const {
  const Rank &ra = rank_[a], &rb = rank_[b];
  if (ra.host == rb.host) {
    // CPU ranks' shared memory is copied by the receiver's core.
    if (ra.vendor == rb.vendor) return bps(c_.vendors.at(ra.vendor).intra) * coreShare(b);
    return std::min(hostCopyBps(a), hostCopyBps(b)) * coreShare(b);  // through pinned host memory
  }
  const Host &ha = c_.hosts[ra.host], &hb = c_.hosts[rb.host];
  double r;
  auto own = c_.links.find({std::min(ra.host, rb.host), std::max(ra.host, rb.host)});
  if (own != c_.links.end())
    r = bps(own->second) / std::max(s.pair, 1);
  else
    r = std::min(bps(ha.nic) * ha.nics / std::max(s.out, 1), bps(hb.nic) * hb.nics / std::max(s.in, 1));
  if (ha.site != hb.site) r = std::min(r, bps(c_.wan) / std::max(s.sites, 1));
  // hetccl's border bytes of GPU ranks leave and enter their devices
  // through pinned host memory (overlapping the transfer: the slower wins).
  return viaHost ? std::min({r, hostCopyBps(a), hostCopyBps(b)}) : r;
}

double Model::latencyS(int a, int b) const {
  const Rank &ra = rank_[a], &rb = rank_[b];
  if (ra.host == rb.host) {
    const Vendor &va = c_.vendors.at(ra.vendor), &vb = c_.vendors.at(rb.vendor);
    if (ra.vendor == rb.vendor) return sec(va.intra.latencyUs);
    return sec(std::max(va.device ? va.hostCopy.latencyUs : va.intra.latencyUs,
                        vb.device ? vb.hostCopy.latencyUs : vb.intra.latencyUs));
  }
  const Host &ha = c_.hosts[ra.host], &hb = c_.hosts[rb.host];
  double l = std::max(ha.nic.latencyUs, hb.nic.latencyUs);
  auto own = c_.links.find({std::min(ra.host, rb.host), std::max(ra.host, rb.host)});
  if (own != c_.links.end()) l = own->second.latencyUs;
  if (ha.site != hb.site) l += c_.wan.latencyUs;
  return sec(l);
}

// Shard fractions of group g's members: equal, or by border link rate.
std::vector<double> Model::shardWeights(int g) const {
  const std::vector<int>& m = groups_[g];
  std::vector<double> w(m.size(), 1.0 / static_cast<double>(m.size()));
  if (c_.borderCut != "bandwidth" || ngroups() < 2) return w;
  // Each member's rate to its size-cut partner in the next group (the
  // library measures the same links).
  const std::vector<int>& other = groups_[(g + 1) % ngroups()];
  for (size_t i = 0; i < m.size(); ++i) w[i] = rateBps(m[i], other[i * other.size() / m.size()]);
  w = sixteenths(w);
  double all = 0;
  for (double x : w) all += x;
  for (double& x : w) x /= all;
  return w;
}

std::map<int, int> Model::ranksPerHost(int g) const {
  std::map<int, int> n;
  for (int r : groups_[g]) ++n[rank_[r].host];
  return n;
}

// One ReduceScatter or AllGather of `bytes` inside group g.
double Model::groupStepS(int g, double bytes) const {
  const std::vector<int>& m = groups_[g];
  const int k = static_cast<int>(m.size());
  if (k == 1) return 0;
  const Vendor& v = c_.vendors.at(rank_[m[0]].vendor);
  const std::map<int, int> perHost = ranksPerHost(g);
  const double part = bytes * (k - 1) / k;
  double lat = 0, slowest = kInf;
  for (int i = 0; i < k; ++i) {
    const int a = m[i], b = m[(i + 1) % k];
    lat = std::max(lat, latencyS(a, b));
    if (v.device) {  // a ring: every rank sends and receives `part` at its next edge's rate
      slowest = std::min(slowest, rateBps(a, b, {perHost.at(rank_[a].host), perHost.at(rank_[b].host), 1, 1}, false));
    }
  }
  if (v.device) return (k - 1) * lat + part / slowest;
  // The host backend's pairwise exchange: bytes to this host's ranks over
  // shm, to the others over the NICs (every rank of the host at once).
  double worst = 0;
  for (int r : m) {
    const int here = perHost.at(rank_[r].host);
    const double local = bytes * (here - 1) / k / (bps(v.intra) * coreShare(r));
    double remote = 0;
    for (int q : m)
      if (rank_[q].host != rank_[r].host)
        remote =
            std::max(remote, bytes / k / rateBps(r, q, {here * (k - here), here * (k - here), here * (k - here), 1}));
    // Received bytes copied or folded, remote ones copied by the kernel on
    // both sides too; on oversubscribed cores this adds to the transfer.
    const double cpu = cpuS(r, bytes * (k - 1) / k + 2 * bytes * (k - here) / k);
    worst = std::max(worst, std::max(local, remote) + cpu);
  }
  return (k - 1) * lat + worst;
}

double Model::groupAllReduceS(int g, double bytes) const {
  const std::vector<int>& m = groups_[g];
  const int k = static_cast<int>(m.size());
  if (k == 1) return 0;
  const Vendor& v = c_.vendors.at(rank_[m[0]].vendor);
  const std::map<int, int> perHost = ranksPerHost(g);
  const int H = static_cast<int>(perHost.size()), per = perHost.begin()->second;
  bool even = true;
  for (auto [h, n] : perHost) even = even && n == per;
  if (!v.device && c_.hostLevels && H >= 2 && per >= 2 && even) {
    // Two levels: inside each host over shm, then a column of one rank a
    // host moves (H-1)/H of a 1/per shard each way, every rank at once.
    int other = -1;
    for (int r : m)
      if (rank_[r].host != rank_[m[0]].host) other = r;
    const double inside =
        2 * (bytes * (per - 1) / per / (bps(v.intra) * coreShare(m[0])) + (per - 1) * latencyS(m[0], m[1]));
    const double column =
        2 * (bytes / per * (H - 1) / H / rateBps(m[0], other, {per, per, per, per}) + (H - 1) * latencyS(m[0], other));
    const double cpu = cpuS(m[0], 2 * (bytes * (per - 1) / per + 3 * bytes / per * (H - 1) / H));
    return inside + column + cpu;
  }
  return 2 * groupStepS(g, bytes);
}

double Model::groupBroadcastS(int g, double bytes) const {
  const std::vector<int>& m = groups_[g];
  const int k = static_cast<int>(m.size());
  if (k == 1) return 0;
  double lat = 0, slowest = kInf;
  std::map<int, int> perHost;
  for (int r : m) ++perHost[rank_[r].host];
  for (int i = 0; i + 1 < k; ++i) {
    lat += latencyS(m[i], m[i + 1]);
    slowest = std::min(slowest, rateBps(m[i], m[i + 1], Share{1, 1, 1, 1}, false));
  }
  return lat + bytes / slowest;  // pipelined along a chain
}

// Directed transfers that run at once: each rank's time is its slowest
// flow (flows share NICs, host pairs' links and sites' links), or its GPU
// copies (each way at the copy rate) where those are slower, plus its CPU
// time (CPU ranks: what they receive, and the kernel's copies over hosts).
double Model::flowsS(const std::vector<Flow>& flows, double* stageS) const {
  std::map<int, int> out, in;
  // Links are full duplex: flows share them one direction at a time.
  std::map<std::pair<int, int>, int> onPair, onSites;
  auto key = [](int x, int y) { return std::make_pair(x, y); };
  std::map<std::string, int> siteIndex;
  for (const Host& h : c_.hosts) siteIndex.emplace(h.site, static_cast<int>(siteIndex.size()));
  auto siteOf = [&](int r) { return siteIndex[c_.hosts[rank_[r].host].site]; };
  for (const Flow& f : flows) {
    const int ha = rank_[f.from].host, hb = rank_[f.to].host;
    if (ha == hb) continue;
    ++out[ha], ++in[hb];
    ++onPair[key(ha, hb)];
    ++onSites[key(siteOf(f.from), siteOf(f.to))];
  }
  const int n = nranks();
  std::vector<double> xfer(n, 0), sent(n, 0), got(n, 0), cpu(n, 0);
  double lat = 0;
  for (const Flow& f : flows) {
    const int ha = rank_[f.from].host, hb = rank_[f.to].host;
    const double r =
        ha == hb
            ? rateBps(f.from, f.to)
            : rateBps(f.from, f.to, {out[ha], in[hb], onPair[key(ha, hb)], onSites[key(siteOf(f.from), siteOf(f.to))]});
    const double t = f.bytes / r;
    xfer[f.from] = std::max(xfer[f.from], t);
    xfer[f.to] = std::max(xfer[f.to], t);
    lat = std::max(lat, latencyS(f.from, f.to));
    sent[f.from] += f.bytes;
    got[f.to] += f.bytes;
    cpu[f.to] += cpuS(f.to, f.bytes * (ha == hb ? 1 : 2));
    if (ha != hb) cpu[f.from] += cpuS(f.from, f.bytes);
  }
  double worst = 0, stage = 0;
  for (int r = 0; r < n; ++r) {
    const double copies = c_.vendors.at(rank_[r].vendor).device ? std::max(sent[r], got[r]) / hostCopyBps(r) : 0;
    worst = std::max(worst, std::max(xfer[r], copies) + cpu[r]);
    stage = std::max(stage, copies);
  }
  if (stageS) *stageS = stage;
  return worst + lat;
}

// The border step of the bandwidth plan: owners exchange the pieces their
// shards share, (k_g + k_h) / K of the overlap each way between an owner
// of group g and one of group h (see the header), all pairs at once; two
// rounds of latency a group (reduce-scatter and allgather).
double Model::borderS(double bytes, double* stageS) const {
  const int G = ngroups();
  double K = 0;
  for (const auto& m : groups_) K += static_cast<double>(m.size());
  std::vector<std::vector<double>> bounds(G);
  for (int g = 0; g < G; ++g) {
    std::vector<double> w = shardWeights(g);
    bounds[g].push_back(0);
    for (double x : w) bounds[g].push_back(bounds[g].back() + x);
  }
  // Shards of two groups overlap where their bounds interleave: one sweep.
  std::vector<Flow> flows;
  double lat = 0;
  for (int g = 0; g < G; ++g)
    for (int h = g + 1; h < G; ++h) {
      const double kg = static_cast<double>(groups_[g].size()), kh = static_cast<double>(groups_[h].size());
      for (size_t i = 0, j = 0; i < groups_[g].size() && j < groups_[h].size();) {
        const double o = std::min(bounds[g][i + 1], bounds[h][j + 1]) - std::max(bounds[g][i], bounds[h][j]);
        if (o > 1e-12) {
          const int a = groups_[g][i], b = groups_[h][j];
          flows.push_back({a, b, bytes * o * (kg + kh) / K});
          flows.push_back({b, a, bytes * o * (kg + kh) / K});
          lat = std::max(lat, latencyS(a, b));
        }
        if (bounds[g][i + 1] < bounds[h][j + 1])
          ++i;
        else
          ++j;
      }
    }
  return flowsS(flows, stageS) + (2 * (G - 1) - 1) * lat;
}

// The latency plan's border: each rank sends its group's whole partial to
// one holder in every other group (the same index, modulo its size).
double Model::latencyBorderS(double bytes, double* stageS) const {
  std::vector<Flow> flows;
  for (int g = 0; g < ngroups(); ++g)
    for (size_t i = 0; i < groups_[g].size(); ++i)
      for (int h = 0; h < ngroups(); ++h)
        if (h != g) flows.push_back({groups_[g][i], groups_[h][i % groups_[h].size()], bytes});
  return flowsS(flows, stageS);
}

// One ring over every rank in rank order, in host memory (GPU ranks copy
// through pinned memory), `volumeFactor` times the bytes per ring edge.
double Model::flatRingS(double bytes, double volumeFactor) const {
  const int P = nranks();
  if (P == 1) return 0;
  double slowest = kInf, lat = 0;
  for (int i = 0; i < P; ++i) {
    const int a = i, b = (i + 1) % P;
    double r = rateBps(a, b);
    if (rank_[a].host == rank_[b].host && rank_[a].vendor == rank_[b].vendor)
      r = std::min({r, hostCopyBps(a), hostCopyBps(b)});
    slowest = std::min(slowest, r);
    lat = std::max(lat, latencyS(a, b));
  }
  return volumeFactor * (P - 1) * lat + volumeFactor * (P - 1) / P * bytes / slowest;
}

Prediction Model::predict(Coll coll, double bytes) const {
  Prediction p;
  const int G = ngroups(), P = nranks();
  auto maxOver = [&](auto f) {
    double t = 0;
    for (int g = 0; g < G; ++g) t = std::max(t, f(g));
    return t;
  };
  switch (coll) {
    case Coll::kAllReduce: {
      p.flatRingUs = flatRingS(bytes, 2) * 1e6;
      if (G == 1) {
        p.groupUs = groupAllReduceS(0, bytes) * 1e6;
        p.plan = "one group";
        break;
      }
      double stage = 0;
      if (bytes < 65536) {  // HETCCL_SMALL_BYTES's default
        p.groupUs = maxOver([&](int g) { return groupAllReduceS(g, bytes); }) * 1e6;
        p.borderUs = latencyBorderS(bytes, &stage) * 1e6;
        p.plan = "latency";
      } else {
        p.groupUs = maxOver([&](int g) { return groupStepS(g, bytes) * 2; }) * 1e6;
        p.borderUs = borderS(bytes, &stage) * 1e6;
        p.plan = "bandwidth";
      }
      p.stageUs = stage * 1e6;
      break;
    }
    case Coll::kAllGather:
    case Coll::kReduceScatter: {
      p.flatRingUs = flatRingS(bytes, 1) * 1e6;
      if (G == 1) {
        p.groupUs = groupStepS(0, bytes) * 1e6;
        p.plan = "one group";
        break;
      }
      // Each rank's block (bytes / P) crosses to its counterpart in every
      // other group; inside each group the blocks spread (AllGather) or are
      // reduced first (ReduceScatter): about one group step of the whole.
      std::vector<Flow> flows;
      for (int g = 0; g < G; ++g)
        for (size_t i = 0; i < groups_[g].size(); ++i)
          for (int h = 0; h < G; ++h)
            if (h != g) flows.push_back({groups_[g][i], groups_[h][i % groups_[h].size()], bytes / P});
      double stage = 0;
      p.borderUs = flowsS(flows, &stage) * 1e6;
      p.stageUs = stage * 1e6;
      p.groupUs = maxOver([&](int g) { return groupStepS(g, bytes); }) * 1e6;
      p.plan = "counterparts";
      break;
    }
    case Coll::kBroadcast: {
      {  // the naive alternative: a pipelined chain over every rank
        double slowest = kInf, lat = 0;
        for (int i = 0; i + 1 < P; ++i) {
          double r = rateBps(i, i + 1);
          r = std::min({r, hostCopyBps(i), hostCopyBps(i + 1)});
          slowest = std::min(slowest, r);
          lat += latencyS(i, i + 1);
        }
        p.flatRingUs = (P > 1 ? lat + bytes / slowest : 0) * 1e6;
      }
      const int root = groups_[0][0];
      if (G == 1) {
        p.groupUs = groupBroadcastS(0, bytes) * 1e6;
        p.plan = "one group";
        break;
      }
      std::vector<Flow> flows;
      for (int h = 1; h < G; ++h) flows.push_back({root, groups_[h][0], bytes});
      double stage = 0;
      p.borderUs = flowsS(flows, &stage) * 1e6;
      p.stageUs = stage * 1e6;
      p.groupUs = maxOver([&](int g) { return groupBroadcastS(g, bytes); }) * 1e6;
      p.plan = "leaders";
      break;
    }
  }
  p.us = p.groupUs + p.borderUs;
  return p;
}

double Model::smallBytes() const {
  if (ngroups() < 2) return 0;
  for (double n = 1024; n <= double(1 << 30); n *= 2) {
    double s = 0;
    const double lat = [&] {
      double t = 0;
      for (int g = 0; g < ngroups(); ++g) t = std::max(t, groupAllReduceS(g, n));
      return t + latencyBorderS(n, &s);
    }();
    double bw = 0;
    for (int g = 0; g < ngroups(); ++g) bw = std::max(bw, 2 * groupStepS(g, n));
    bw += borderS(n, &s);
    if (bw <= lat) return n;
  }
  return double(1 << 30);
}

double Model::chunkBytes(double bytes) const {
  if (ngroups() < 2) return 0;
  double stage = 0;
  const double whole = borderS(bytes, &stage);
  if (stage <= 0) return 0;  // no GPU copies to overlap
  // In chunks of c the copies and the transfer overlap: the busier of the
  // two sets the pace, plus one chunk's worth of the other, plus a
  // per-chunk latency on every message.
  const double lat1 = borderS(1, nullptr);  // one message's latencies
  double best = whole + stage, bestC = 0;   // one piece: copies, then the transfer
  for (double c = 256 * 1024; c <= 64.0 * 1024 * 1024 && c < bytes; c *= 2) {
    double s = 0;
    const double x = borderS(c, &s);
    const double t = std::max(whole, stage) + std::min(x, s) + std::ceil(bytes / c) * lat1;
    if (t < best) best = t, bestC = c;
  }
  return bestC;
}

}  // namespace hetccl::model
