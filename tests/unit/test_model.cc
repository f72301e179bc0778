// The cost model (src/model) against times worked out by hand from its
// rules, and the communicator's model (comm/comm_model.h) built from peer
// records and the border cut's rates.
#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

#include "comm/comm_model.h"
#include "model/cost_model.h"

namespace hetccl {
namespace {

using model::Cluster;
using model::Coll;
using model::Model;

constexpr double kMiB = 1024.0 * 1024.0;

model::Vendor gpu(double copyGbps) {
  model::Vendor v;
  v.intra = {1000, 0};
  v.hostCopy = {copyGbps, 0};
  return v;
}

model::Vendor cpu(double shmGbps) {
  model::Vendor v;
  v.device = false;
  v.intra = {shmGbps, 0};
  return v;
}

model::Host host(const std::string& name, std::vector<std::pair<std::string, int>> ranks, double nicGbps) {
  model::Host h;
  h.name = name;
  h.ranks = std::move(ranks);
  h.nic = {nicGbps, 0};
  return h;
}

TEST(Model, TwoGpuGroupsOnOneHostMoveTheWholeBufferEachWayThroughPinnedMemory) {
  // One GPU in each group: each rank sends its partial's half and receives
  // the other, then the folded halves: N each way at the copy rate.
  Cluster c;
  c.vendors = {{"g0", gpu(80)}, {"g1", gpu(80)}};  // 10 GB/s
  c.hosts = {host("h", {{"g0", 1}, {"g1", 1}}, 100)};
  Model m(c);
  ASSERT_EQ(m.ngroups(), 2);
  const auto p = m.predict(Coll::kAllReduce, 256 * kMiB);
  EXPECT_STREQ(p.plan, "bandwidth");
  EXPECT_NEAR(p.us, 256 * kMiB / 10e9 * 1e6, 1);
  EXPECT_NEAR(p.borderShare(), 1.0, 1e-9);
  // Small calls take the latency plan (HETCCL_SMALL_BYTES's default).
  EXPECT_STREQ(m.predict(Coll::kAllReduce, 1024).plan, "latency");
}

TEST(Model, FlatRingIsSetByItsSlowestEdge) {
  // 4 CPU ranks on 2 hosts, 1 Gbit/s NICs: a ring over them crosses at 1
  // Gbit/s; AllReduce moves 2 (P-1)/P of the buffer over every edge.
  Cluster c;
  c.vendors = {{"a", cpu(800)}};
  c.hosts = {host("h0", {{"a", 2}}, 1), host("h1", {{"a", 2}}, 1)};
  c.hostLevels = false;
  const auto p = Model(c).predict(Coll::kAllReduce, 16 * kMiB);
  EXPECT_NEAR(p.flatRingUs, 2.0 * 3 / 4 * 16 * kMiB / 125e6 * 1e6, 1);
  EXPECT_STREQ(p.plan, "one group");
}

TEST(Model, HostLevelsCutWhatLeavesEachHostByTheRanksOnIt) {
  // 8 ranks, 4 a host, links far slower than shm: one level sends 4N out of
  // each host, two levels N (bench/multihost_levels.py's prediction).
  Cluster c;
  c.vendors = {{"a", cpu(1e6)}};
  c.hosts = {host("h0", {{"a", 4}}, 2), host("h1", {{"a", 4}}, 2)};
  const double two = Model(c).predict(Coll::kAllReduce, 16 * kMiB).us;
  c.hostLevels = false;
  const double one = Model(c).predict(Coll::kAllReduce, 16 * kMiB).us;
  EXPECT_NEAR(one / two, 4.0, 0.01);
  EXPECT_NEAR(two, 16 * kMiB / 250e6 * 1e6, 100);
}

TEST(Model, BandwidthCutGivesTheSlowLinkLessByItsRate) {
  // bench/border_cut.py: groups a | a | b,b, border links 100 and 400
  // Mbit/s. Size cut: 8 MiB each way over the slow link; bandwidth cut:
  // pieces 1:4, 3.2 MiB on either link.
  Cluster c;
  c.vendors = {{"a", cpu(1e6)}, {"b", cpu(1e6)}};
  c.hosts = {host("h0", {{"a", 1}}, 1e6), host("h1", {{"a", 1}}, 1e6), host("h2", {{"b", 2}}, 1e6)};
  c.links[{0, 2}] = {0.1, 0};
  c.links[{1, 2}] = {0.4, 0};
  const double size = Model(c).predict(Coll::kAllReduce, 16 * kMiB).borderUs;
  c.borderCut = "bandwidth";
  const double bw = Model(c).predict(Coll::kAllReduce, 16 * kMiB).borderUs;
  EXPECT_NEAR(size, 8 * kMiB / 12.5e6 * 1e6, 10);
  EXPECT_NEAR(size / bw, 2.5, 0.01);
  EXPECT_EQ(model::sixteenths({0.1, 0.4}), (std::vector<double>{4, 16}));
  EXPECT_EQ(model::sixteenths({0, 1e-9, 5}), (std::vector<double>{1, 1, 16}));
}

TEST(Model, ThresholdAndChunksFollowLatencyAndCopies) {
  // Two GPU hosts of different vendors: the farther apart (latency), the
  // later the bandwidth plan pays; GPU copies to overlap give chunks where
  // latency allows, CPU ranks none.
  Cluster c;
  c.vendors = {{"nv", gpu(400)}, {"amd", gpu(400)}};
  c.hosts = {host("n", {{"nv", 8}}, 400), host("m", {{"amd", 8}}, 400)};
  c.hosts[0].nic.latencyUs = c.hosts[1].nic.latencyUs = 5;
  const double nearBy = Model(c).smallBytes();
  c.hosts[0].nic.latencyUs = c.hosts[1].nic.latencyUs = 500;
  const double farApart = Model(c).smallBytes();
  EXPECT_GT(nearBy, 0);
  EXPECT_GT(farApart, nearBy);
  // Chunks pay where each costs little latency: near by, not far apart.
  EXPECT_EQ(Model(c).chunkBytes(1024 * kMiB), 0);
  c.hosts[0].nic.latencyUs = c.hosts[1].nic.latencyUs = 5;
  EXPECT_GT(Model(c).chunkBytes(1024 * kMiB), 0);
  Cluster h;
  h.vendors = {{"a", cpu(80)}, {"b", cpu(80)}};
  h.hosts = {host("x", {{"a", 2}}, 10), host("y", {{"b", 2}}, 10)};
  EXPECT_EQ(Model(h).chunkBytes(1024 * kMiB), 0);
}

TEST(Model, RefusesAVendorItDoesNotKnowAndAnEmptyCluster) {
  Cluster c;
  c.vendors = {{"a", cpu(80)}};
  c.hosts = {host("h", {{"b", 1}}, 1)};
  EXPECT_THROW(Model{c}, std::invalid_argument);
  EXPECT_THROW(Model{Cluster{}}, std::invalid_argument);
  model::Coll k;
  EXPECT_TRUE(model::collFromName("reducescatter", &k));
  EXPECT_EQ(k, Coll::kReduceScatter);
  EXPECT_FALSE(model::collFromName("alltoall", &k));
}

PeerInfo peerOn(int rank, uint64_t host, const char* group) {
  PeerInfo p;
  p.rank = rank;
  p.hostHash = host;
  snprintf(p.hostname, sizeof(p.hostname), "node%llu", static_cast<unsigned long long>(host));
  snprintf(p.deviceKind, sizeof(p.deviceKind), "host");
  snprintf(p.group, sizeof(p.group), "%s", group);
  return p;
}

TEST(PlanModel, TheCommunicatorsModelTakesItsHostsAndBorderRates) {
  // Groups a | a | b,b on three hosts (bench/border_cut.py's layout).
  std::vector<PeerInfo> peers = {peerOn(0, 1, "a"), peerOn(1, 2, "a"), peerOn(2, 3, "b"), peerOn(3, 3, "b")};
  const Topology t = buildTopology(peers);
  BorderCut size;
  EXPECT_EQ(modelSmallBytes(t, peers, size), 0u) << "no rates: the setting's default stands";
  BorderCut cut{"bandwidth", "probe", {0.1, 0.4, 0.1, 0.4}, {50, 50, 60, 60}, {4, 16, 4, 16}};
  const model::Cluster c = clusterOf(t, peers, cut);
  ASSERT_EQ(c.hosts.size(), 3u);
  EXPECT_EQ(c.hosts[2].ranks, (std::vector<std::pair<std::string, int>>{{"b", 2}}));
  EXPECT_DOUBLE_EQ(c.hosts[0].nic.gbps, 0.1);
  EXPECT_DOUBLE_EQ(c.hosts[2].nic.gbps, 0.5);  // both its ranks cross
  EXPECT_DOUBLE_EQ(c.hosts[2].nic.latencyUs, 60);
  EXPECT_FALSE(c.vendors.at("a").device);
  EXPECT_EQ(c.borderCut, "bandwidth");
  const size_t slow = modelSmallBytes(t, peers, cut);
  EXPECT_GT(slow, 0u);
  // The bandwidth plan pays from about the links' latency-bandwidth
  // product: on links a hundred times faster (and ten times closer), later.
  BorderCut fast{"bandwidth", "probe", {10, 40, 10, 40}, {5, 5, 5, 5}, {4, 16, 4, 16}};
  EXPECT_GT(modelSmallBytes(t, peers, fast), slow);
}

}  // namespace
}  // namespace hetccl
