// One verified collective call: builds every rank's inputs, issues the call
// on this rank (in place or out of place, as the Check says), and compares
// the result with the reference (reference.h). Also checks that send
// buffers are left as they were and that nothing is written outside the
// output buffer (guard bytes on both sides). Results that must be the same
// on every rank (AllReduce, Broadcast, AllGather) are also hashed and
// compared across ranks (Rank::reportSame); above 64K elements only one
// rank computes the reference, the hashes vouch for the others.
//
// In place means: AllReduce, Broadcast, Reduce: recvbuff == sendbuff;
// AllGather: sendbuff == recvbuff + rank*count; ReduceScatter: recvbuff ==
// sendbuff + rank*recvcount; AlltoAll: recvbuff == sendbuff; Gather (root):
// sendbuff == recvbuff + root*count; Scatter (root): recvbuff == sendbuff +
// root*count. SendRecv has no in-place form: its "in-place" variant posts
// the receives before the sends, around the ring the other way.
#pragma once

#include <map>

#include "harness.h"
#include "reference.h"

namespace hmp {

class Checker {
 public:
  explicit Checker(const Rank& r);
  ~Checker();  // destroys the PreMulSum ops it created
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // Issues and verifies one call. Failures are recorded with EXPECT; a call
  // that returns an error ends the rank (AbortRank).
  void run(const Check& c);

  // The hetccl op for (op, dt): built-ins, or a PreMulSum op of this
  // communicator made on first use.
  hetcclRedOp_t redOp(Op op, hetcclDataType_t dt);

 private:
  void allReduce(const Check& c);
  void broadcast(const Check& c);
  void reduce(const Check& c);
  void allGather(const Check& c);
  void reduceScatter(const Check& c);
  void alltoAll(const Check& c);
  void gather(const Check& c);
  void scatter(const Check& c);
  void sendRecv(const Check& c);

  const Rank& r_;
  std::map<hetcclDataType_t, hetcclRedOp_t> preMul_;
};

}  // namespace hmp
