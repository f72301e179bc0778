// Collective plans. Each collective over one group goes straight to the
// group's backend; over several groups it runs group steps (backend), border
// steps (transport) and local reductions, as docs/design.md describes.
// Host ranks execute the steps in order before returning.
#pragma once

#include <cstddef>
#include <vector>

#include "core/datatype.h"
#include "device/device.h"
#include "transport/transport.h"

namespace hetccl {

class Backend;
class Comm;
class LocalOps;
struct ChunkHooks;

struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as the API takes it (per rank for AllGather, ReduceScatter, AlltoAll, Gather, Scatter)
  DataType dt = hetcclFloat32;
  ReduceOp op;
  int root = -1;        // Broadcast, Reduce, Gather, Scatter: the root; -1 otherwise
  int peer = -1;        // kSendRecv: the rank this one sends to or receives from; -1 otherwise
  bool isSend = false;  // kSendRecv: a send (buffers may be null when count is 0)
  Stream stream = nullptr;
};

// The byte ranges of the user's buffers one call reads (send) and writes
// (recv), on rank `rank` of `nranks`: what the root alone touches, what
// every rank does, none where the buffer is null.
struct CallExtent {
  size_t sendBytes = 0, recvBytes = 0;
  bool writesRecv = false;
};
CallExtent callExtent(int nranks, int rank, const CollArgs& a);

// The message tag of a collective call.
MsgTag makeTag(uint64_t seq, const CollArgs& a);

// What a plan runs with, given by whoever runs it (the calling thread of a
// host rank, a GPU rank's proxy job): nothing of it is communicator state.
struct PlanContext {
  Comm& comm;
  // The group's steps: the vendor library, or on a GPU rank's proxy the
  // staged wrapper around it.
  Backend& backend;
  // A chunked AllReduce's hand-off to the caller's stream, or null.
  ChunkHooks* hooks = nullptr;
  // The tag of the collective being run (runCollective sets it, and
  // publishes it to the host backend, which tags its group steps with it).
  MsgTag tag{};
};
// The context of a host rank's own thread: the group backend, host ops.
PlanContext hostPlan(Comm& c);

void runAllReduce(const PlanContext& p, const CollArgs& a);
// Elements per chunk of an AllReduce of `count` (count itself when it runs
// in one piece): the same on every rank of the communicator.
size_t allReduceChunk(const Comm& c, size_t count, DataType dt);
void runBroadcast(const PlanContext& p, const CollArgs& a);
void runReduce(const PlanContext& p, const CollArgs& a);
void runAllGather(const PlanContext& p, const CollArgs& a);
void runReduceScatter(const PlanContext& p, const CollArgs& a);
void runAlltoAll(const PlanContext& p, const CollArgs& a);
void runGather(const PlanContext& p, const CollArgs& a);
void runScatter(const PlanContext& p, const CollArgs& a);
// AlltoAll, Gather and Scatter as the sends and receives they are (kind
// kSendRecv, self included): how the exchange plan and a group's vendor
// library both run them.
std::vector<CollArgs> pointToPointParts(const CollArgs& a, int nranks, int rank);
// Point-to-point operations of one group call (or a single one): same-group
// pairs through the backend, the rest through the transport; no deadlock for
// any pairing order.
void runPointToPoint(const PlanContext& p, const CollArgs* ops, size_t n);

// Dispatches by a.kind (collectives; not send/recv). Assigns the sequence
// number and sets the call tag (in its own copy of p).
void runCollective(const PlanContext& p, const CollArgs& a);

// The calls of one hetccl call or one group call, on this thread: the
// collectives in call order, then all point-to-point operations together.
void runCalls(const PlanContext& p, const std::vector<CollArgs>& calls);

}  // namespace hetccl
