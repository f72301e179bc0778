// A cost model of hetccl's plans on a described cluster: per collective and
// size, the time of the plan hetccl runs (its group steps, its border step,
// the copies of GPU ranks' border share) and of the naive alternative, one
// flat ring over every rank whose slowest link sets the pace.
//
// Links are alpha-beta: a message of b bytes takes latency + b / rate. The
// model knows where each rank is (host, site) and what links it has:
//   - inside a group on one host: the vendor's GPU-to-GPU link (NVLink,
//     xGMI, PCIe peer-to-peer), or shared memory for CPU ranks;
//   - between hosts: the hosts' NICs (a host's ranks share them), or a
//     named link between two hosts; between sites the wide-area link,
//     which every flow between the two sites shares;
//   - a GPU rank's copies between device and pinned host memory (PCIe):
//     the border share of GPU ranks leaves and enters the device there,
//     and so does every byte of the flat ring (it is a host-memory ring).
// Group steps follow the vendor library's ring (time (k-1)/k N over the
// slowest rate a rank of the ring has) or, for CPU groups, the host
// backend's pairwise exchange (in two levels where a group has the same
// number of ranks on each of several hosts). The border step follows
// topology/border.h: each owner exchanges its shard with the other groups'
// owners, 2 (G-1)/G of it each way for G equal groups.
//
// The model is what hetccl-plan prints and what docs/performance.md
// compares with measured runs; it leaves out CPU contention, protocol
// overheads and congestion inside a fabric.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hetccl::model {

struct Link {
  double gbps = 0;       // Gbit/s, one direction
  double latencyUs = 0;  // per message
};

struct Vendor {
  bool device = true;  // GPU ranks (false: CPU ranks in host memory)
  Link intra;          // rank to rank inside one host (NVLink, xGMI; shm for CPU ranks)
  Link hostCopy;       // GPU rank: device <-> pinned host memory, each way (PCIe)
  // CPU ranks: bytes one core copies or folds per second (Gbit/s); 0: CPU
  // time not counted. Every byte a CPU rank receives is folded or copied
  // once, and bytes over tcp once more by the kernel on each side; shared
  // memory moves at `intra` times the receiver's part of a core.
  double copyGbps = 0;
};

struct Host {
  std::string name;
  std::string site;
  std::vector<std::pair<std::string, int>> ranks;  // vendor -> ranks (GPUs) on this host
  Link nic;                                        // one NIC
  int nics = 1;
  double cores = 0;  // for CPU ranks' copies and folds; 0: one a rank (emulated hosts share a machine's)
};

struct Cluster {
  std::map<std::string, Vendor> vendors;
  std::vector<Host> hosts;  // expanded (no counts)
  Link wan;                 // between two sites, shared by every flow between them
  // Host pairs with their own link (replaces the NICs between them), by
  // host index, smaller first.
  std::map<std::pair<int, int>, Link> links;
  std::string borderCut = "size";  // size | bandwidth (HETCCL_BORDER_CUT)
  bool hostLevels = true;          // HETCCL_HOST_LEVELS
};

// The bandwidth cut's weights (HETCCL_BORDER_CUT=bandwidth, the library's
// and the model's): each rate in whole sixteenths of the largest, at least
// one, so that timings a little apart give the same shards everywhere.
std::vector<double> sixteenths(const std::vector<double>& rate);

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast };
const char* collName(Coll c);
// "allreduce" ... ; false where the name is unknown.
bool collFromName(const std::string& name, Coll* out);

struct Prediction {
  double us = 0;                                  // the plan hetccl would pick
  double groupUs = 0, borderUs = 0, stageUs = 0;  // its parts
  const char* plan = "";                          // "one group", "latency", "bandwidth", ...
  double flatRingUs = 0;                          // one ring over every rank, in host memory
  double borderShare() const { return us > 0 ? borderUs / us : 0; }
};

class Model {
 public:
  explicit Model(Cluster c);
  int nranks() const { return static_cast<int>(rank_.size()); }
  int ngroups() const { return static_cast<int>(groups_.size()); }
  const Cluster& cluster() const { return c_; }
  // Time of `coll` on `bytes` (nccl-tests' size: the whole buffer for
  // AllReduce and Broadcast, all ranks' parts together for the others).
  Prediction predict(Coll coll, double bytes) const;
  // AllReduce across groups: the smallest power-of-two size from which the
  // bandwidth plan beats the latency plan (HETCCL_SMALL_BYTES), and the
  // chunk size that pipelines GPU ranks' border copies with the transfer
  // best at `bytes` (0: one piece, where there is nothing to overlap).
  double smallBytes() const;
  double chunkBytes(double bytes) const;

 private:
  struct Rank {
    int host;
    std::string vendor;
    int group;
  };
  double groupStepS(int g, double bytes) const;  // one ReduceScatter or AllGather of `bytes`
  double groupAllReduceS(int g, double bytes) const;
  std::map<int, int> ranksPerHost(int g) const;  // host -> ranks of group g on it
  double groupBroadcastS(int g, double bytes) const;
  struct Flow {
    int from, to;
    double bytes;
  };
  double flowsS(const std::vector<Flow>& flows, double* stageS) const;
  double borderS(double bytes, double* stageS) const;  // the bandwidth plan's border step
  double latencyBorderS(double bytes, double* stageS) const;
  // Flows that share a transfer's links: leaving its source host, entering
  // its destination host, on its host pair's own link, between its sites.
  struct Share {
    int out = 1, in = 1, pair = 1, sites = 1;
  };
  // One flow from rank a to rank b. viaHost: in host memory (hetccl's
  // border, the flat ring), so GPU ranks' copies bound it too; otherwise the
  // vendor library's (GPUDirect between hosts).
  double rateBps(int a, int b, Share s, bool viaHost = true) const;
  double rateBps(int a, int b) const { return rateBps(a, b, Share{1, 1, 1, 1}); }
  double latencyS(int a, int b) const;
  double hostCopyBps(int r) const;
  // The part of a core CPU rank r has (1 for GPU ranks, or cores enough).
  double coreShare(int r) const;
  // CPU time of rank r for `bytes` it copies or folds (0 for GPU ranks).
  double cpuS(int r, double bytes) const;
  double flatRingS(double bytes, double volumeFactor) const;
  std::vector<double> shardWeights(int g) const;
  Cluster c_;
  std::vector<Rank> rank_;
  std::vector<std::vector<int>> groups_;  // by vendor, ranks ascending
};

}  // namespace hetccl::model
