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

class Comm;

struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // as the API takes it (per rank for AllGather, ReduceScatter, AlltoAll, Gather, Scatter)
  DataType dt = hetcclFloat32;
  ReduceOp op;
  int root = -1;     // root, or peer for send/recv
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

void runAllReduce(Comm& c, const CollArgs& a);
// Elements per chunk of an AllReduce of `count` (count itself when it runs
// in one piece): the same on every rank of the communicator.
size_t allReduceChunk(const Comm& c, size_t count, DataType dt);
void runBroadcast(Comm& c, const CollArgs& a);
void runReduce(Comm& c, const CollArgs& a);
void runAllGather(Comm& c, const CollArgs& a);
void runReduceScatter(Comm& c, const CollArgs& a);
void runAlltoAll(Comm& c, const CollArgs& a);
void runGather(Comm& c, const CollArgs& a);
void runScatter(Comm& c, const CollArgs& a);
// Point-to-point operations of one group call (or a single one): same-group
// pairs through the backend, the rest through the transport; no deadlock for
// any pairing order.
void runPointToPoint(Comm& c, const CollArgs* ops, size_t n);

// Dispatches by a.kind (collectives; not send/recv). Assigns the sequence
// number and sets the call tag.
void runCollective(Comm& c, const CollArgs& a);

// The calls of one hetccl call or one group call, on this thread: the
// collectives in call order, then all point-to-point operations together.
void runCalls(Comm& c, const std::vector<CollArgs>& calls);

}  // namespace hetccl
