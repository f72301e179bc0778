#include "gpu/border_coll.h"

#include <algorithm>
#include <string>

#include "gpu/border_allreduce.h"
#include "gpu/border_block.h"
#include "comm/comm.h"
#include "core/call.h"
#include "core/error.h"

namespace hetccl {
namespace {

void enqueueAllGather(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, RedKind::kSum);
  DeviceBorder& b = bc.border;
  const int k = bc.groupRanks(), i = bc.groupIndex(), G = bc.peers(), me = bc.me();
  uint8_t* mine = bc.block(c.rank());
  bc.dev.copy(mine, a.send, bc.blockBytes, bc.caller);  // nothing where in place
  if (unequalGroups(c)) {
    enqueueUnequalAllGather(bc);
    bc.finish("AllGather", bc.blockBytes * c.nranks());
    return;
  }
  bc.pieces(b.partBytes() * G /* the whole out area */, [&](size_t off, size_t len) {
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, bc.outStream);
    bc.put(b.out(me, slot), mine + off, len, bc.outStream);
    bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.block(rankAt(c, q, i)) + off, b.out(q, slot), len);
    }
    bc.ackReads(seq, slot, bc.inStream);
  });
  bc.join(bc.caller);
  if (k > 1) {
    // Every rank of the group holds the blocks of its own index in every
    // group: exchange them inside the group.
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i) continue;
      for (int g = 0; g < G; ++g) {
        be.send(bc.block(rankAt(c, g, i)), a.count, a.dt, j, bc.caller);
        be.recv(bc.block(rankAt(c, g, j)), a.count, a.dt, j, bc.caller);
      }
    }
    be.groupEnd();
  }
  bc.finish("AllGather", bc.blockBytes * c.nranks());
}

// The root's group's rank of index `across` (the root's index, or 0 where
// groups differ in size and the root's index has no border peers: the root
// first broadcasts inside its group) carries the buffer to its border
// peers, which broadcast it inside their groups.
void enqueueBroadcast(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, RedKind::kSum);
  DeviceBorder& b = bc.border;
  const int rootGroup = c.topo().groupOf[a.root], rootIndex = c.topo().groupRank[a.root];
  const int across = rootIndex < b.shares() ? rootIndex : 0;
  const bool isRoot = c.rank() == a.root, inRootGroup = c.topo().groupOf[c.rank()] == rootGroup;
  const bool carrier = inRootGroup && bc.groupIndex() == across;
  if (isRoot) bc.dev.copy(bc.recv, a.send, bc.blockBytes, bc.caller);
  if (across != rootIndex && inRootGroup)
    bc.groupBackend().broadcast(bc.recv, bc.recv, a.count, a.dt, rootIndex, bc.caller);
  if (bc.groupIndex() == across) {  // the carrier and its border peers
    bc.pieces(b.partBytes() * bc.peers(), [&](size_t off, size_t len) {
      int slot = 0;
      const uint64_t seq = bc.take(&slot);
      if (carrier) {
        bc.waitSlotFree(seq, slot, bc.outStream);
        bc.put(b.out(bc.me(), slot), bc.recv + off, len, bc.outStream);
        bc.dev.streamWriteValue(bc.outStream, b.ready(bc.me(), slot), seq);
      } else {
        bc.readFromPeer(bc.inStream, rootGroup, seq, slot, false, bc.recv + off, b.out(rootGroup, slot), len);
      }
      bc.ackReads(seq, slot, bc.inStream);
    });
    bc.join(bc.caller);
  }
  if (bc.groupRanks() > 1 && !(inRootGroup && across != rootIndex))
    bc.groupBackend().broadcast(bc.recv, bc.recv, a.count, a.dt, across, bc.caller);
  bc.finish("Broadcast", bc.blockBytes, rootGroup);
}

// Groups of several ranks, piece by piece (one part of every block): the
// vendor library reduces inside the group, to rank j of the group, the
// blocks of every group's rank j (the own group's into the receive buffer,
// the others' into outgoing scratch); then the border peers swap what they
// reduced for each other and fold, as with groups of one rank.
void enqueueGroupReduceScatter(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  Backend& be = bc.groupBackend();
  const int k = bc.groupRanks(), i = bc.groupIndex(), G = bc.peers(), me = bc.me();
  auto outgoing = [&](int g) { return bc.outgoingOf(g); };
  const ReduceOp groupOp = bc.groupOp();
  const size_t piece = b.partBytes();
  for (size_t off = 0; off < bc.blockBytes; off += piece) {
    const size_t len = std::min(piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    if (off) bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // outgoing scratch copied out
    be.groupStart();
    for (int g = 0; g < G; ++g)
      for (int j = 0; j < k; ++j) {
        // Only the root's (j == i) destination is written.
        uint8_t* to = j == i && g != me ? outgoing(g) : bc.recv + off;
        be.reduce(bc.send + rankAt(c, g, j) * bc.blockBytes + off, to, cnt, bc.dt, groupOp, j, bc.caller);
      }
    be.groupEnd();
    bc.fork(bc.caller);
    bc.swapParts(len, outgoing, [&](int q) { return bc.scratchOf(q); });
    bc.fold(bc.recv + off, bc.recv + off, cnt, bc.inStream);
  }
}

// Groups of one rank: global rank of group g is rankAt(c, g, 0). A
// PreMulSum scales each piece first: those going out into outgoing scratch
// (out stream), the own one into the receive buffer (in stream).
void enqueueReduceScatter(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, a.op.kind);
  if (unequalGroups(c)) {
    enqueueUnequalReduceScatter(bc);
    bc.finish("ReduceScatter", bc.blockBytes * c.nranks());
    return;
  }
  if (bc.groupRanks() > 1) {
    enqueueGroupReduceScatter(bc);
  } else {
    const uint8_t* own = bc.send + c.rank() * bc.blockBytes;
    const bool pre = a.op.preMul;
    bc.pieces(bc.border.partBytes(), [&](size_t off, size_t len) {
      const size_t cnt = len / bc.elemBytes;
      for (int p = 0; p < bc.peers() && pre; ++p)
        if (p != bc.me()) bc.scale(bc.outgoingOf(p), bc.sendTo(p) + off, cnt, a.op.scalar, bc.outStream);
      bc.swapParts(
          len, [&](int p) { return pre ? bc.outgoingOf(p) : bc.sendTo(p) + off; },
          [&](int q) { return bc.scratchOf(q); });
      const uint8_t* mine = own + off;
      if (pre) bc.scale(bc.recv + off, mine, cnt, a.op.scalar, bc.inStream), mine = bc.recv + off;
      bc.fold(bc.recv + off, mine, cnt, bc.inStream);
    });
  }
  bc.divide(bc.recv);
  bc.join(bc.caller);
  bc.finish("ReduceScatter", bc.blockBytes * c.nranks());
}

// Groups of several ranks, piece by piece (at most a part over k of every
// block): the blocks for another group's ranks cross once, from each rank
// to its border peer there, which hands each rank of its group the one
// that is its; blocks inside the group go through the vendor library
// directly (in place: piece by piece, each piece first copied to outgoing
// scratch, as a send and a receive on one block may not overlap). A
// piece's hand-over writes only what that piece's copies out have read.
void enqueueGroupAlltoAll(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  Backend& be = bc.groupBackend();
  const int k = bc.groupRanks(), i = bc.groupIndex(), G = bc.peers(), me = bc.me();
  const bool inPlace = bc.send == bc.recv;
  if (!inPlace) {
    bc.dev.copy(bc.block(c.rank()), bc.send + c.rank() * bc.blockBytes, bc.blockBytes, bc.caller);
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i) continue;
      be.send(bc.send + rankAt(c, me, j) * bc.blockBytes, bc.args.count, bc.dt, j, bc.caller);
      be.recv(bc.block(rankAt(c, me, j)), bc.args.count, bc.dt, j, bc.caller);
    }
    be.groupEnd();
  }
  for (size_t off = 0, piece = bc.groupPiece(); off < bc.blockBytes; off += piece) {
    const size_t len = std::min(piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    bc.fork(bc.caller);  // the last piece's hand-over has read the scratch
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, bc.outStream);
    for (int h = 0; h < G; ++h) {
      if (h == me) continue;
      for (int j = 0; j < k; ++j)  // part h: the pieces for group h's ranks, in their order
        bc.put(b.out(me, slot, h) + j * len, bc.send + rankAt(c, h, j) * bc.blockBytes + off, len, bc.outStream);
    }
    bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.scratchOf(q), b.out(q, slot, me), k * len);
    }
    bc.ackReads(seq, slot, bc.inStream);
    bc.join(bc.caller);
    // Rank j of this group gets, from every other group q, the piece that
    // q's rank i sent it; this rank gets q's rank j's piece from rank j.
    uint8_t* own = b.outgoing(0);  // in place: this group's pieces, k x len <= a part
    for (int j = 0; j < k && inPlace; ++j)
      if (j != i) bc.dev.copy(own + j * len, bc.send + rankAt(c, me, j) * bc.blockBytes + off, len, bc.caller);
    be.groupStart();
    for (int j = 0; j < k && inPlace; ++j) {
      if (j == i) continue;
      be.send(own + j * len, cnt, bc.dt, j, bc.caller);
      be.recv(bc.block(rankAt(c, me, j)) + off, cnt, bc.dt, j, bc.caller);
    }
    for (int q = 0; q < G; ++q) {
      if (q == me) continue;
      bc.dev.copy(bc.block(rankAt(c, q, i)) + off, bc.scratchOf(q) + i * len, len, bc.caller);
      for (int j = 0; j < k; ++j) {
        if (j == i) continue;
        be.send(bc.scratchOf(q) + j * len, cnt, bc.dt, j, bc.caller);
        be.recv(bc.block(rankAt(c, q, j)) + off, cnt, bc.dt, j, bc.caller);
      }
    }
    be.groupEnd();
  }
}

// Block p of the send buffer goes to rank p, block q of the receive buffer
// comes from rank q.
void enqueueAlltoAll(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, RedKind::kSum);
  if (unequalGroups(c)) {
    enqueueUnequalAlltoAll(bc);
    bc.finish("AlltoAll", bc.blockBytes * c.nranks());
    return;
  }
  if (bc.groupRanks() > 1) {
    enqueueGroupAlltoAll(bc);
    bc.finish("AlltoAll", bc.blockBytes * c.nranks());
    return;
  }
  bc.dev.copy(bc.block(c.rank()), bc.send + c.rank() * bc.blockBytes, bc.blockBytes,
              bc.caller);  // nothing where in place
  bc.pieces(bc.border.partBytes(), [&](size_t off, size_t len) {
    bc.swapParts(
        len, [&](int p) { return bc.sendTo(p) + off; }, [&](int q) { return bc.block(rankAt(c, q, 0)) + off; },
        /*afterOwn=*/true);
  });
  bc.join(bc.caller);
  bc.finish("AlltoAll", bc.blockBytes * c.nranks());
}

// Every group reduces, piece by piece, to its rank of the root's index
// (with groups of several ranks, through the vendor library: the root's
// group into the receive buffer, the others into outgoing scratch); those
// ranks' pieces cross to the root, which folds them in.
void enqueueReduce(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, a.op.kind);
  DeviceBorder& b = bc.border;
  const int rootGroup = c.topo().groupOf[a.root], rootIndex = c.topo().groupRank[a.root];
  // Groups of different sizes: a root of an index the smallest group lacks
  // gets the result from its group's rank 0 (the collector), piece by piece.
  const int across = rootIndex < b.shares() ? rootIndex : 0;
  const bool isRoot = c.rank() == a.root, atBorder = bc.groupIndex() == across;
  const bool collector = atBorder && c.topo().groupOf[c.rank()] == rootGroup, handOver = collector != isRoot;
  if (bc.groupRanks() == 1) {  // then the collector is the root
    // A PreMulSum scales each piece first: the others' into outgoing
    // scratch (out stream), the root's own into its receive buffer.
    const bool pre = a.op.preMul;
    bc.pieces(b.partBytes(), [&](size_t off, size_t len) {
      const size_t cnt = len / bc.elemBytes;
      const uint8_t* mine = bc.send + off;
      if (pre && !isRoot) bc.scale(b.outgoing(0), mine, cnt, a.op.scalar, bc.outStream), mine = b.outgoing(0);
      if (pre && isRoot) bc.scale(bc.recv + off, mine, cnt, a.op.scalar, bc.inStream), mine = bc.recv + off;
      bc.toRoot(isRoot, mine, len, [&](int q) { return bc.scratchOf(q); });
      if (isRoot) bc.fold(bc.recv + off, mine, cnt, bc.inStream);
    });
  } else {
    Backend& be = bc.groupBackend();
    const ReduceOp groupOp = bc.groupOp();
    for (size_t off = 0; off < bc.blockBytes; off += b.partBytes()) {
      const size_t len = std::min(b.partBytes(), bc.blockBytes - off), cnt = len / bc.elemBytes;
      // Written at each group's rank of index `across` only (others pass
      // their input: the vendor library does not write it).
      uint8_t* to = isRoot && collector ? bc.recv + off
                    : atBorder          ? b.outgoing(0)
                                        : const_cast<uint8_t*>(bc.send + off);
      if (off && atBorder && !isRoot)
        bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // the last piece is out
      be.reduce(bc.send + off, to, cnt, bc.dt, groupOp, across, bc.caller);
      if (atBorder) {
        bc.fork(bc.caller);
        bc.toRoot(collector, to, len, [&](int q) { return bc.scratchOf(q); });
        if (collector) bc.fold(to, to, cnt, bc.inStream);
      }
      if (!handOver) continue;
      if (collector) bc.join(bc.caller);  // the piece is folded
      be.groupStart();
      if (collector)
        be.send(to, cnt, bc.dt, rootIndex, bc.caller);
      else
        be.recv(bc.recv + off, cnt, bc.dt, across, bc.caller);
      be.groupEnd();
    }
  }
  if (isRoot) bc.divide(bc.recv, collector ? bc.inStream : bc.caller);
  if (atBorder) bc.join(bc.caller);
  bc.finish("Reduce", bc.blockBytes);
}

// Groups of one rank: every rank's block out, the root copies them in
// (a Reduce without the fold).
// Groups of several ranks, piece by piece (a part over k of every block):
// each group's rank of the root's index gathers its group's pieces through
// the vendor library (the root straight into its receive buffer, the others
// into outgoing scratch), and those cross to the root.
void enqueueGroupGather(BlockCall& bc) {
  Comm& c = bc.comm;
  Backend& be = bc.groupBackend();
  const int k = bc.groupRanks(), i = bc.groupIndex(), me = bc.me(), rootIndex = bc.rootIndex();
  const bool isRoot = c.rank() == bc.args.root, atBorder = i == rootIndex;
  uint8_t* gathered = bc.border.outgoing(0);
  for (size_t off = 0, piece = bc.groupPiece(); off < bc.blockBytes; off += piece) {
    const size_t len = std::min(piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    // Where group rank j's piece goes on this group's gathering rank.
    auto at = [&](int j) { return isRoot ? bc.block(rankAt(c, me, j)) + off : gathered + j * len; };
    if (off && atBorder && !isRoot) bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // the last piece is out
    if (atBorder) bc.dev.copy(at(i), bc.send + off, len, bc.caller);  // nothing where in place
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i || (!atBorder && j != rootIndex)) continue;
      if (atBorder)
        be.recv(at(j), cnt, bc.dt, j, bc.caller);
      else
        be.send(bc.send + off, cnt, bc.dt, j, bc.caller);
    }
    be.groupEnd();
    if (!atBorder) continue;
    bc.fork(bc.caller);
    bc.toRoot(isRoot, gathered, k * len, [&](int q) { return bc.scratchOf(q); });
    if (!isRoot) continue;
    for (int q = 0; q < bc.peers(); ++q)
      for (int j = 0; j < k && q != me; ++j)
        bc.dev.copy(bc.block(rankAt(c, q, j)) + off, bc.scratchOf(q) + j * len, len, bc.inStream);
  }
  if (atBorder) bc.join(bc.caller);
}

void enqueueGather(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, RedKind::kSum);
  if (unequalGroups(c)) {
    enqueueUnequalGather(bc);
    bc.finish("Gather", bc.blockBytes * c.nranks());
    return;
  }
  if (bc.groupRanks() > 1) {
    enqueueGroupGather(bc);
    bc.finish("Gather", bc.blockBytes * c.nranks());
    return;
  }
  const bool isRoot = c.rank() == a.root;
  if (isRoot) bc.dev.copy(bc.block(c.rank()), bc.send, bc.blockBytes, bc.caller);  // nothing where in place
  bc.pieces(bc.border.partBytes(), [&](size_t off, size_t len) {
    bc.toRoot(isRoot, bc.send + off, len, [&](int q) { return bc.block(rankAt(c, q, 0)) + off; });
  });
  bc.join(bc.caller);
  bc.finish("Gather", bc.blockBytes * c.nranks());
}

// Groups of several ranks, piece by piece (a part over k of every block):
// the root's pieces for another group cross to that group's rank of the
// root's index, which hands each rank of its group its own through the
// vendor library; the root hands its own group theirs directly.
void enqueueGroupScatter(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  Backend& be = bc.groupBackend();
  const int k = bc.groupRanks(), i = bc.groupIndex(), me = bc.me(), rootGroup = bc.rootGroup(),
            rootIndex = bc.rootIndex();
  const bool isRoot = c.rank() == bc.args.root, atBorder = i == rootIndex;
  for (size_t off = 0, piece = bc.groupPiece(); off < bc.blockBytes; off += piece) {
    const size_t len = std::min(piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    // Where group rank j's piece is on this group's handing rank.
    auto from = [&](int j) {
      return isRoot ? bc.send + rankAt(c, me, j) * bc.blockBytes + off : bc.scratchOf(rootGroup) + j * len;
    };
    if (atBorder) {
      bc.fork(bc.caller);  // the last piece's hand-over has read the scratch
      int slot = 0;
      const uint64_t seq = bc.take(&slot);
      if (isRoot) {
        bc.waitSlotFree(seq, slot, bc.outStream);
        for (int h = 0; h < bc.peers(); ++h)
          for (int j = 0; j < k && h != me; ++j)
            bc.put(b.out(me, slot, h) + j * len, bc.send + rankAt(c, h, j) * bc.blockBytes + off, len, bc.outStream);
        bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
      } else {
        bc.readFromPeer(bc.inStream, rootGroup, seq, slot, false, bc.scratchOf(rootGroup), b.out(rootGroup, slot, me),
                        k * len);
      }
      bc.ackReads(seq, slot, bc.inStream);
      bc.join(bc.caller);
      bc.dev.copy(bc.recv + off, from(i), len, bc.caller);  // nothing where in place
    }
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i || (!atBorder && j != rootIndex)) continue;
      if (atBorder)
        be.send(from(j), cnt, bc.dt, j, bc.caller);
      else
        be.recv(bc.recv + off, cnt, bc.dt, j, bc.caller);
    }
    be.groupEnd();
  }
}

// Groups of one rank: the root puts each rank's block in that rank's part
// of its out area; every rank copies its part in (a Broadcast of distinct
// parts).
void enqueueScatter(Comm& c, const CollArgs& a) {
  BlockCall bc(c, a, RedKind::kSum);
  if (unequalGroups(c)) {
    enqueueUnequalScatter(bc);
    bc.finish("Scatter", bc.blockBytes * c.nranks(), bc.rootGroup());
    return;
  }
  if (bc.groupRanks() > 1) {
    enqueueGroupScatter(bc);
    bc.finish("Scatter", bc.blockBytes * c.nranks(), bc.rootGroup());
    return;
  }
  DeviceBorder& b = bc.border;
  const int me = bc.me(), rootGroup = c.topo().groupOf[a.root];
  const bool isRoot = c.rank() == a.root;
  if (isRoot)
    bc.dev.copy(bc.recv, bc.send + c.rank() * bc.blockBytes, bc.blockBytes, bc.caller);  // nothing where in place
  bc.pieces(b.partBytes(), [&](size_t off, size_t len) {
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    if (isRoot) {
      bc.waitSlotFree(seq, slot, bc.outStream);
      for (int p = 0; p < bc.peers(); ++p)
        if (p != me) bc.put(b.out(me, slot, p), bc.sendTo(p) + off, len, bc.outStream);
      bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
    } else {
      bc.readFromPeer(bc.inStream, rootGroup, seq, slot, false, bc.recv + off, b.out(rootGroup, slot, me), len);
    }
    bc.ackReads(seq, slot, bc.inStream);
  });
  bc.join(bc.caller);
  bc.finish("Scatter", bc.blockBytes * c.nranks(), rootGroup);
}

// A PreMulSum (float Avg too) on the border: its scalar known on the host
// (one in device memory is read in stream order by the staged path) and a
// float type, which the scale kernel takes; where the group steps scale
// (groupScales: the vendor library's PreMulSum), a type it takes there.
bool scalesOnBorder(const CollArgs& a, bool groupScales) {
  if (!a.op.preMul) return true;
  if (a.op.scalarAt || !dataTypeIsFloat(a.dt)) return false;
  return !groupScales || a.dt == hetcclFloat16 || a.dt == hetcclBfloat16 || a.dt == hetcclFloat32 ||
         a.dt == hetcclFloat64;
}

}  // namespace

bool takesDeviceBorder(Comm& c, const CollArgs& a) {
  if (!c.deviceBorder() || !c.kernels() || a.count == 0) return false;
  // Whether any group has several ranks: the same answer on every rank, as
  // the choice must be.
  bool several = false;
  for (const Group& g : c.topo().groups) several = several || g.ranks.size() > 1;
  const size_t es = dataTypeSize(a.dt), n = static_cast<size_t>(c.nranks());
  const size_t blk = a.count * es, minBytes = c.deviceBorder()->minBytes();
  const bool root = c.rank() == a.root;
  // takes: the same on every rank (the call's kind, size, op and the
  // layout). buffers: this rank's own, in place or apart; the border
  // cannot take others, and a rank that staged alone would leave its peers
  // waiting on the border, so such buffers are refused (below).
  bool takes = false, buffers = true;
  const char* inPlace = "recvbuff == sendbuff";
  switch (a.kind) {
    case CollKind::kAllReduce:
      takes = blk >= minBytes && scalesOnBorder(a, /*groupScales=*/false);
      buffers = inPlaceOrDisjoint(a, blk, blk);
      break;
    case CollKind::kAllGather:
      takes = blk * n >= minBytes;
      buffers = inPlaceOrDisjoint(a, blk, blk * n, c.rank() * blk);
      inPlace = "sendbuff == recvbuff + rank x count";
      break;
    case CollKind::kBroadcast:
      takes = blk >= minBytes;
      buffers = !root || inPlaceOrDisjoint(a, blk, blk);
      break;
    case CollKind::kReduceScatter:
      takes = blk * n >= minBytes && scalesOnBorder(a, several);
      buffers = inPlaceOrDisjoint(a, blk * n, blk, 0, c.rank() * blk);
      inPlace = "recvbuff == sendbuff + rank x count";
      break;
    case CollKind::kAlltoAll:
      takes = blk * n >= minBytes;
      buffers = inPlaceOrDisjoint(a, blk * n, blk * n);
      break;
    case CollKind::kReduce:
      takes = blk >= minBytes && scalesOnBorder(a, several);
      buffers = !root || inPlaceOrDisjoint(a, blk, blk);
      break;
    case CollKind::kGather:
      takes = blk * n >= minBytes;
      buffers = !root || inPlaceOrDisjoint(a, blk, blk * n, c.rank() * blk);
      inPlace = "sendbuff == recvbuff + rank x count";
      break;
    case CollKind::kScatter:
      takes = blk * n >= minBytes;
      buffers = !root || inPlaceOrDisjoint(a, blk * n, blk, 0, c.rank() * blk);
      inPlace = "recvbuff == sendbuff + rank x count";
      break;
    default: return false;
  }
  if (takes && !buffers)
    throwError(hetcclInvalidArgument,
               std::string(collKindName(a.kind)) + ": sendbuff and recvbuff overlap without being in place (" +
                   inPlace +
                   "): the device border, which the other ranks take for this call, cannot take them; pass "
                   "buffers in place or apart");
  return takes;
}

void enqueueDeviceBorder(Comm& c, const CollArgs& a) {
  DeviceBorder::Enqueuing inside(*c.deviceBorder());
  switch (a.kind) {
    case CollKind::kAllReduce: return enqueueDeviceBorderAllReduce(c, a);
    case CollKind::kAllGather: return enqueueAllGather(c, a);
    case CollKind::kBroadcast: return enqueueBroadcast(c, a);
    case CollKind::kReduceScatter: return enqueueReduceScatter(c, a);
    case CollKind::kAlltoAll: return enqueueAlltoAll(c, a);
    case CollKind::kReduce: return enqueueReduce(c, a);
    case CollKind::kGather: return enqueueGather(c, a);
    case CollKind::kScatter: return enqueueScatter(c, a);
    default: break;
  }
}

}  // namespace hetccl
