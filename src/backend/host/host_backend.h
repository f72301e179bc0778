// The built-in backend for groups of CPU-memory ranks. Collectives are
// direct algorithms over the communicator's transport (shm on one host, tcp
// otherwise): pairwise-exchange ReduceScatter, direct AllGather, and for
// small AllReduce one all-to-all exchange with a fold in rank order. A large
// AllReduce of a group spread evenly over several hosts (m ranks on each)
// runs in two levels: ReduceScatter inside each host, ReduceScatter and
// AllGather of each shard between the ranks of the same index on every
// host, AllGather inside each host; what crosses hosts drops m-fold.
// Reductions are deterministic: every element is folded in a fixed order.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace hetccl {

class HostBackend : public Backend {
 public:
  explicit HostBackend(const BackendContext& ctx);
  const char* name() const override { return "host"; }

  void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) override;
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                     Stream s) override;
  void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) override;
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) override;
  void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root, Stream s) override;
  void reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                           const ReduceOp& op, Stream s) override;
  void allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) override;
  void send(const void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void recv(void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void groupStart() override { ++groupDepth_; }
  void groupEnd() override;

 private:
  int global(int groupRank) const { return ctx_.ranks[groupRank]; }
  MsgTag tag() const { return ctx_.callTag ? *ctx_.callTag : MsgTag{}; }
  void run(std::vector<Xfer>& xfers);
  // Reduces count elements of every rank's `send` into `recv` (which may be
  // send) at every rank; shards [lo, hi) per rank given by bounds.
  void reduceScatterRanges(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt, RedKind op) {
    reduceScatterTeam(all_, rank(), send, recv, bounds, dt, op);
  }
  void allGatherRanges(void* buf, const std::vector<size_t>& bounds, DataType dt) {
    allGatherTeam(all_, rank(), buf, bounds, dt);
  }
  // The same over `team` (group ranks; I am team[me]); bounds by team index.
  void reduceScatterTeam(const std::vector<int>& team, int me, const void* send, void* recv,
                         const std::vector<size_t>& bounds, DataType dt, RedKind op);
  void allGatherTeam(const std::vector<int>& team, int me, void* buf, const std::vector<size_t>& bounds, DataType dt);
  // The two-level AllReduce where the group spans hosts evenly (see above).
  bool hostLevels() const { return !local_.empty(); }
  void allReduceByHost(const void* send, void* recv, size_t count, DataType dt, RedKind op);

  std::vector<int> all_;             // 0..k-1
  std::vector<int> local_, column_;  // hostLevels(): my host's ranks; the ranks of my index on every host
  int localMe_ = 0, columnMe_ = 0;
  int groupDepth_ = 0;
  std::vector<Xfer> pending_;  // p2p posted inside a group
  std::vector<uint8_t> scratch_;
};

}  // namespace hetccl
