#include "algorithm/device_border_coll.h"

#include <algorithm>

#include "algorithm/device_border_allreduce.h"
#include "algorithm/device_border_call.h"
#include "algorithm/device_exec.h"
#include "comm/comm.h"

namespace hetccl {
namespace {

int groupSize(Comm& c) { return static_cast<int>(c.topo().groupOfRank(c.rank()).ranks.size()); }

// Global rank of group g's rank with index i.
int rankAt(Comm& c, int g, int i) { return c.topo().groups[g].ranks[i]; }

// The receive block of global rank r.
uint8_t* block(const CollArgs& a, int r, size_t blk) { return static_cast<uint8_t*>(a.recv) + r * blk; }

void enqueueAllGather(Comm& c, const CollArgs& a) {
  BorderCall bc(c, a.dt, RedKind::kSum);
  DeviceBorder& b = bc.b;
  const Stream s = a.stream;
  const size_t blk = a.count * bc.es;
  const int k = groupSize(c), i = c.myLocal(), G = bc.G(), me = bc.me();
  uint8_t* mine = block(a, c.rank(), blk);
  bc.d.copy(mine, a.send, blk, s);  // nothing where in place
  const uint64_t firstSeq = b.seq();
  const size_t piece = b.partBytes() * G;  // the whole out area
  Stream o = b.outStream(), in = b.inStream();
  bc.fork(s);
  for (size_t off = 0; off < blk; off += piece) {
    const size_t len = std::min(piece, blk - off);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, o);
    bc.d.copy(b.out(me, slot), mine + off, len, o);
    bc.d.streamWriteValue(o, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.d.streamWaitValue(in, b.ready(q, slot), seq);
      bc.d.copy(block(a, rankAt(c, q, i), blk) + off, b.out(q, slot), len, in);
    }
    bc.ackReads(seq, slot, in);
  }
  bc.join(s);
  if (k > 1) {
    // Every rank of the group holds the blocks of its own index in every
    // group: exchange them inside the group.
    c.deviceState()->waitStagedDone(c.options().timeoutS, &c.abortFlag());
    Backend& be = c.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i) continue;
      for (int g = 0; g < G; ++g) {
        be.send(block(a, rankAt(c, g, i), blk), a.count, a.dt, j, s);
        be.recv(block(a, rankAt(c, g, j), blk), a.count, a.dt, j, s);
      }
    }
    be.groupEnd();
  }
  bc.watch(s, "AllGather", blk * c.nranks(), firstSeq, -1, false);
}

void enqueueBroadcast(Comm& c, const CollArgs& a) {
  BorderCall bc(c, a.dt, RedKind::kSum);
  DeviceBorder& b = bc.b;
  const Stream s = a.stream;
  const size_t bytes = a.count * bc.es;
  const int k = groupSize(c), i = c.myLocal();
  const int rootGroup = c.topo().groupOf[a.root], rootIndex = c.topo().localIndex[a.root];
  auto* recv = static_cast<uint8_t*>(a.recv);
  const bool isRoot = c.rank() == a.root;
  if (isRoot) bc.d.copy(recv, a.send, bytes, s);
  const uint64_t firstSeq = b.seq();
  if (i == rootIndex) {  // the border peers of the root
    const size_t piece = b.partBytes() * bc.G();
    Stream o = b.outStream(), in = b.inStream();
    bc.fork(s);
    for (size_t off = 0; off < bytes; off += piece) {
      const size_t len = std::min(piece, bytes - off);
      int slot = 0;
      const uint64_t seq = bc.take(&slot);
      if (isRoot) {
        bc.waitSlotFree(seq, slot, o);
        bc.d.copy(b.out(bc.me(), slot), recv + off, len, o);
        bc.d.streamWriteValue(o, b.ready(bc.me(), slot), seq);
      } else {
        bc.d.streamWaitValue(in, b.ready(rootGroup, slot), seq);
        bc.d.copy(recv + off, b.out(rootGroup, slot), len, in);
      }
      bc.ackReads(seq, slot, in);
    }
    bc.join(s);
  }
  if (k > 1) {
    c.deviceState()->waitStagedDone(c.options().timeoutS, &c.abortFlag());
    c.groupBackend().broadcast(recv, recv, a.count, a.dt, rootIndex, s);
  }
  bc.watch(s, "Broadcast", bytes, firstSeq, rootGroup, false);
}

// Groups of several ranks, piece by piece (one part of every block): the
// vendor library reduces inside the group, to rank j of the group, the
// blocks of every group's rank j (the own group's into the receive buffer,
// the others' into outgoing scratch); then the border peers swap what they
// reduced for each other and fold, as with groups of one rank.
void enqueueGroupReduceScatter(Comm& c, const CollArgs& a) {
  BorderCall bc(c, a.dt, a.op.kind);
  DeviceBorder& b = bc.b;
  Backend& be = c.groupBackend();
  const Stream s = a.stream;
  const size_t blk = a.count * bc.es;
  const int k = groupSize(c), i = c.myLocal(), G = bc.G(), me = bc.me();
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  const ReduceOp groupOp(a.op.kind);
  c.deviceState()->waitStagedDone(c.options().timeoutS, &c.abortFlag());
  const uint64_t firstSeq = b.seq();
  const size_t piece = b.partBytes();
  Stream o = b.outStream(), in = b.inStream();
  for (size_t off = 0; off < blk; off += piece) {
    const size_t len = std::min(piece, blk - off), cnt = len / bc.es;
    if (off) bc.d.streamWaitEvent(s, bc.event(o));  // outgoing scratch copied out
    be.groupStart();
    for (int g = 0; g < G; ++g)
      for (int j = 0; j < k; ++j) {
        uint8_t* to = j != i ? recv + off /* ignored off the root */ : g == me ? recv + off : b.outgoing(g < me ? g : g - 1);
        be.reduce(send + rankAt(c, g, j) * blk + off, to, cnt, a.dt, groupOp, j, s);
      }
    be.groupEnd();
    bc.fork(s);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, o);
    for (int p = 0; p < G; ++p)
      if (p != me) bc.d.copy(b.out(me, slot, p), b.outgoing(p < me ? p : p - 1), len, o);
    bc.d.streamWriteValue(o, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.d.streamWaitValue(in, b.ready(q, slot), seq);
      bc.d.copy(bc.scratchOf(q), b.out(q, slot, me), len, in);
    }
    bc.ackReads(seq, slot, in);
    bc.fold(recv + off, recv + off, cnt, in);
  }
  if (a.op.postDiv) bc.check(bc.kn.divide(recv, a.count, static_cast<int>(a.dt), a.op.divisor, in), "divide");
  bc.join(s);
  bc.watch(s, "ReduceScatter", blk * c.nranks(), firstSeq, -1, false);
}

// Groups of one rank: global rank of group g is rankAt(c, g, 0).
void enqueueReduceScatter(Comm& c, const CollArgs& a) {
  if (groupSize(c) > 1) return enqueueGroupReduceScatter(c, a);
  BorderCall bc(c, a.dt, a.op.kind);
  DeviceBorder& b = bc.b;
  const Stream s = a.stream;
  const size_t blk = a.count * bc.es;
  const int G = bc.G(), me = bc.me();
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  const uint8_t* own = send + c.rank() * blk;
  const uint64_t firstSeq = b.seq();
  const size_t piece = b.partBytes();
  Stream o = b.outStream(), in = b.inStream();
  bc.fork(s);
  for (size_t off = 0; off < blk; off += piece) {
    const size_t len = std::min(piece, blk - off);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, o);
    for (int p = 0; p < G; ++p)
      if (p != me) bc.d.copy(b.out(me, slot, p), send + rankAt(c, p, 0) * blk + off, len, o);
    bc.d.streamWriteValue(o, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.d.streamWaitValue(in, b.ready(q, slot), seq);
      bc.d.copy(bc.scratchOf(q), b.out(q, slot, me), len, in);
    }
    bc.ackReads(seq, slot, in);
    bc.fold(recv + off, own + off, len / bc.es, in);
  }
  if (a.op.postDiv) bc.check(bc.kn.divide(recv, a.count, static_cast<int>(a.dt), a.op.divisor, in), "divide");
  bc.join(s);
  bc.watch(s, "ReduceScatter", blk * c.nranks(), firstSeq, -1, false);
}

// Groups of one rank: block p of the send buffer goes to rank p, block q
// of the receive buffer comes from rank q.
void enqueueAlltoAll(Comm& c, const CollArgs& a) {
  BorderCall bc(c, a.dt, RedKind::kSum);
  DeviceBorder& b = bc.b;
  const Stream s = a.stream;
  const size_t blk = a.count * bc.es;
  const int G = bc.G(), me = bc.me();
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  bc.d.copy(recv + c.rank() * blk, send + c.rank() * blk, blk, s);  // nothing where in place
  const uint64_t firstSeq = b.seq();
  const size_t piece = b.partBytes();
  Stream o = b.outStream(), in = b.inStream();
  bc.fork(s);
  for (size_t off = 0; off < blk; off += piece) {
    const size_t len = std::min(piece, blk - off);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, o);
    for (int p = 0; p < G; ++p)
      if (p != me) bc.d.copy(b.out(me, slot, p), send + rankAt(c, p, 0) * blk + off, len, o);
    bc.d.streamWriteValue(o, b.ready(me, slot), seq);
    // In place the blocks written here are the ones copied out above.
    bc.d.streamWaitValue(in, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.d.streamWaitValue(in, b.ready(q, slot), seq);
      bc.d.copy(recv + rankAt(c, q, 0) * blk + off, b.out(q, slot, me), len, in);
    }
    bc.ackReads(seq, slot, in);
  }
  bc.join(s);
  bc.watch(s, "AlltoAll", blk * c.nranks(), firstSeq, -1, false);
}

// Groups of one rank: every rank's data out, the root folds them in.
void enqueueReduce(Comm& c, const CollArgs& a) {
  BorderCall bc(c, a.dt, a.op.kind);
  DeviceBorder& b = bc.b;
  const Stream s = a.stream;
  const size_t bytes = a.count * bc.es;
  const int G = bc.G(), me = bc.me();
  const int rootGroup = c.topo().groupOf[a.root];
  const bool isRoot = me == rootGroup;
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  const uint64_t firstSeq = b.seq();
  const size_t piece = b.partBytes();
  Stream o = b.outStream(), in = b.inStream();
  bc.fork(s);
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = std::min(piece, bytes - off);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    if (!isRoot) {
      bc.waitSlotFree(seq, slot, o);
      bc.d.copy(b.out(me, slot), send + off, len, o);
      bc.d.streamWriteValue(o, b.ready(me, slot), seq);
    } else {
      for (int q = 0; q < G; ++q) {
        if (q == me) continue;
        bc.d.streamWaitValue(in, b.ready(q, slot), seq);
        bc.d.copy(bc.scratchOf(q), b.out(q, slot), len, in);
      }
      bc.fold(recv + off, send + off, len / bc.es, in);
    }
    bc.ackReads(seq, slot, in);
  }
  if (isRoot && a.op.postDiv)
    bc.check(bc.kn.divide(recv, a.count, static_cast<int>(a.dt), a.op.divisor, in), "divide");
  bc.join(s);
  bc.watch(s, "Reduce", bytes, firstSeq, -1, false);
}

}  // namespace

bool takesDeviceBorder(Comm& c, const CollArgs& a) {
  if (!c.deviceBorder() || !c.kernels() || a.count == 0) return false;
  const size_t es = dataTypeSize(a.dt), n = static_cast<size_t>(c.nranks());
  const size_t blk = a.count * es;
  auto* s = static_cast<const uint8_t*>(a.send);
  auto* r = static_cast<const uint8_t*>(a.recv);
  switch (a.kind) {
    case CollKind::kAllReduce:
      if (a.op.scalarAt) return false;  // a scalar in device memory: staged (copied in stream order)
      return blk >= c.deviceBorder()->minBytes() && inPlaceOrDisjoint(a, blk, blk);
    case CollKind::kAllGather:
      return blk * n >= c.deviceBorder()->minBytes() && inPlaceOrDisjoint(a, blk, blk * n, c.rank() * blk);
    case CollKind::kBroadcast:
      return blk >= c.deviceBorder()->minBytes() &&
             (c.rank() != a.root || inPlaceOrDisjoint(a, blk, blk));
    case CollKind::kReduceScatter:
      // Plain ops and integer Avg (a PreMulSum would scale every rank's
      // whole input first). Groups of several ranks: out of place (the
      // group's reductions read every block while the receive block fills).
      if (a.op.preMul) return false;
      if (groupSize(c) > 1)
        return blk * n >= c.deviceBorder()->minBytes() && (s + blk * n <= r || r + blk <= s);
      return blk * n >= c.deviceBorder()->minBytes() &&
             (r == s + c.rank() * blk || s + blk * n <= r || r + blk <= s);
    case CollKind::kAlltoAll:
      return groupSize(c) == 1 && blk * n >= c.deviceBorder()->minBytes() &&
             inPlaceOrDisjoint(a, blk * n, blk * n);
    case CollKind::kReduce:
      if (groupSize(c) != 1 || a.op.preMul) return false;
      return blk >= c.deviceBorder()->minBytes() && (c.rank() != a.root || inPlaceOrDisjoint(a, blk, blk));
    default:
      return false;
  }
}

void enqueueDeviceBorder(Comm& c, const CollArgs& a) {
  switch (a.kind) {
    case CollKind::kAllReduce: return enqueueDeviceBorderAllReduce(c, a);
    case CollKind::kAllGather: return enqueueAllGather(c, a);
    case CollKind::kBroadcast: return enqueueBroadcast(c, a);
    case CollKind::kReduceScatter: return enqueueReduceScatter(c, a);
    case CollKind::kAlltoAll: return enqueueAlltoAll(c, a);
    case CollKind::kReduce: return enqueueReduce(c, a);
    default: break;
  }
}

}  // namespace hetccl
