// The device border's collectives between groups of different sizes that
// run in lanes: lane s < m (m = the smallest group's size) of each group is
// its ranks s, s + m, ...; its rank s has border peers (the other groups'
// ranks s), the others hand their part to it or get theirs from it through
// the vendor library (gpu/border_coll.h).
#include <algorithm>

#include "gpu/border_block.h"

namespace hetccl {

// Groups of different sizes (m = the smallest group's size): lane s < m
// of each group carries the blocks of its ranks j with j % m == s. Inside
// each group the ranks from index m on hand their block to their lane's
// rank (vendor send/recv); the lane's border peers swap their blocks, one
// block of each peer a round (a peer with fewer sits the last rounds out);
// then each lane's rank broadcasts every block it holds inside its group.
void enqueueUnequalAllGather(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  const int m = b.shares(), i = bc.groupIndex(), me = bc.me(), G = bc.peers(), groups = c.topo().ngroups();
  const int mine = c.topo().groupOf[c.rank()];
  auto size = [&](int g) { return groupSizeOf(c, g); };
  auto lane = [&](int g, int s) { return bc.laneSize(g, s); };
  if (size(mine) > 1) {
    Backend& be = bc.groupBackend();
    be.groupStart();
    if (i >= m) be.send(bc.block(c.rank()), bc.args.count, bc.dt, i % m, bc.caller);
    for (int j = i + m; i < m && j < size(mine); j += m)
      be.recv(bc.block(rankAt(c, mine, j)), bc.args.count, bc.dt, j, bc.caller);
    be.groupEnd();
  }
  if (i < m) {
    int rounds = 0;
    for (int g = 0; g < groups; ++g) rounds = std::max(rounds, lane(g, i));
    bc.fork(bc.caller);
    for (int t = 0; t < rounds; ++t) {
      for (size_t off = 0, piece = b.partBytes() * G; off < bc.blockBytes; off += piece) {
        const size_t len = std::min(piece, bc.blockBytes - off);
        int slot = 0;
        const uint64_t seq = bc.take(&slot);
        if (t < lane(me, i)) {
          bc.waitSlotFree(seq, slot, bc.outStream);
          bc.put(b.out(me, slot), bc.block(rankAt(c, me, i + t * m)) + off, len, bc.outStream);
          bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
        }
        for (int q = 0; q < G; ++q)
          if (q != me && t < lane(q, i))
            bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.block(rankAt(c, q, i + t * m)) + off, b.out(q, slot),
                            len);
        bc.ackReads(seq, slot, bc.inStream);
      }
    }
    bc.join(bc.caller);
  }
  if (size(mine) == 1) return;
  Backend& be = bc.groupBackend();
  be.groupStart();
  for (int g = 0; g < groups; ++g)
    for (int j = 0; j < size(g); ++j) {
      uint8_t* at = bc.block(rankAt(c, g, j));
      be.broadcast(at, at, bc.args.count, bc.dt, j % m, bc.caller);
    }
  be.groupEnd();
}

// Groups of different sizes (m = the smallest group's size):
// lane s < m of each group reduces, for the ranks of the other groups, the
// blocks of their ranks j with j % m == s, one such rank a round. A round,
// piece by piece: the vendor library reduces inside each group to each
// lane's rank the blocks of that round's ranks in the other groups (into
// outgoing scratch); the lane's border peers swap them; the lane's rank
// folds what came with its own block for its own group's rank of the
// round; the vendor library reduces that rank's block inside the group to
// it, the lane's rank giving the fold instead of its block.
// A PreMulSum scales every block once before it is summed: in the first
// group step (the vendor library's PreMulSum), in a group of one before it
// goes out (the scale kernel, into outgoing scratch), the lane rank's own
// block before the fold, and in the last group step each rank's block but
// the lane rank's fold (scaled into one part of scratch, one vendor Reduce
// after the other).
void enqueueUnequalReduceScatter(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  const int m = b.shares(), i = bc.groupIndex(), me = bc.me(), groups = c.topo().ngroups();
  const int mine = c.topo().groupOf[c.rank()];
  auto size = [&](int g) { return groupSizeOf(c, g); };
  auto lane = [&](int g, int s) { return bc.laneSize(g, s); };
  auto src = [&](int g, int j, size_t off) { return bc.send + rankAt(c, g, j) * bc.blockBytes + off; };
  int rounds = 0, laneRounds = 0;
  for (int g = 0; g < groups; ++g) {
    rounds = std::max(rounds, lane(g, 0));
    if (i < m) laneRounds = std::max(laneRounds, lane(g, i));
  }
  const bool several = size(mine) > 1, pre = bc.args.op.preMul;
  const double alpha = bc.args.op.scalar;
  const ReduceOp op(bc.kind), first = bc.groupOp();
  // A block scaled for the last group step: one part, free there (the
  // border steps of the piece are joined). Not outgoing(0), the fold.
  uint8_t* scaled = b.hasPeers() ? b.scratch(0) : b.ownStaging();
  for (int t = 0; t < rounds; ++t)
    for (size_t off = 0; off < bc.blockBytes; off += b.partBytes()) {
      const size_t len = std::min(b.partBytes(), bc.blockBytes - off), cnt = len / bc.elemBytes;
      const bool crosses = i < m && t < laneRounds;
      if (several) {
        if (crosses && (t || off))
          bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // outgoing scratch is out
        Backend& be = bc.groupBackend();
        be.groupStart();
        for (int s = 0; s < m; ++s)
          for (int h = 0; h < groups; ++h)
            if (h != mine && t < lane(h, s)) {
              const uint8_t* from = src(h, s + t * m, off);
              // Written at the lane's rank only.
              be.reduce(from, s == i ? bc.outgoingOf(h) : const_cast<uint8_t*>(from), cnt, bc.dt, first, s, bc.caller);
            }
        be.groupEnd();
      }
      const bool arrives = i < m && t < lane(mine, i);  // this round has a rank in this lane here
      // The fold for this group's rank of the round: straight into the
      // receive buffer where that is this rank (a group of one).
      uint8_t* folded = several ? b.outgoing(0) : bc.recv + off;
      if (crosses) {
        bc.fork(bc.caller);
        int slot = 0;
        const uint64_t seq = bc.take(&slot);
        bc.waitSlotFree(seq, slot, bc.outStream);
        for (int p = 0; p < bc.peers(); ++p) {
          if (p == me || t >= lane(p, i)) continue;
          const uint8_t* piece = several ? bc.outgoingOf(p) : src(p, i + t * m, off);
          if (!several && pre) {
            bc.scale(bc.outgoingOf(p), piece, cnt, alpha, bc.outStream);
            piece = bc.outgoingOf(p);
          }
          bc.put(b.out(me, slot, p), piece, len, bc.outStream);
        }
        bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
        if (arrives) {
          bc.dev.streamWaitValue(bc.inStream, b.ready(me, slot), seq);  // outgoing scratch is out: the fold goes there
          for (int q = 0; q < bc.peers(); ++q)
            if (q != me) bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.scratchOf(q), b.out(q, slot, me), len);
        }
        bc.ackReads(seq, slot, bc.inStream);
        if (arrives) {
          const uint8_t* own = src(mine, i + t * m, off);
          if (pre) {
            bc.scale(folded, own, cnt, alpha, bc.inStream);
            own = folded;
          }
          bc.fold(folded, own, cnt, bc.inStream);
        }
        bc.join(bc.caller);
      }
      if (!several) continue;
      Backend& be = bc.groupBackend();
      if (!pre) be.groupStart();  // scaled: one Reduce after the other through the one part
      for (int s = 0; s < m; ++s) {
        if (t >= lane(mine, s)) continue;
        const int j = s + t * m;
        const uint8_t* from = s == i ? folded : src(mine, j, off);
        if (pre && s != i) {
          bc.scale(scaled, from, cnt, alpha, bc.caller);
          from = scaled;
        }
        be.reduce(from, j == i ? bc.recv + off : const_cast<uint8_t*>(from), cnt, bc.dt, op, j, bc.caller);
      }
      if (!pre) be.groupEnd();
    }
  bc.divide(bc.recv, bc.caller);
}

// Groups of different sizes (m = the smallest group's size):
// rank s < m of each group carries across the blocks of its lane (ranks s,
// s + m, ...) for every rank of the other groups. Piece by piece (a part
// over the largest lane times the largest group, whole elements): the
// lane's other ranks hand their pieces for the other groups to rank s
// (vendor; into outgoing scratch, one part per group); rank s puts, for
// each other group, its lane's pieces for that group's ranks in that
// group's part of its out area, fetches the other groups' parts for its
// own group (their lane s's pieces for every rank here) and hands each
// rank of its group its pieces (vendor). Blocks inside the group go
// through the vendor library directly, whole (in place: last, piece by
// piece through one part of scratch).
void enqueueUnequalAlltoAll(BlockCall& bc) {
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  const int m = b.shares(), i = bc.groupIndex(), groups = c.topo().ngroups();
  const int mine = c.topo().groupOf[c.rank()];
  auto size = [&](int g) { return groupSizeOf(c, g); };
  auto lane = [&](int g, int s) { return bc.laneSize(g, s); };
  const int k = size(mine);
  int kmax = 1, lmax = 1;
  for (int g = 0; g < groups; ++g) {
    kmax = std::max(kmax, size(g));
    lmax = std::max(lmax, lane(g, 0));  // lane 0 is a group's longest
  }
  const size_t piece =
      std::max(bc.elemBytes, b.partBytes() / static_cast<size_t>(kmax * lmax) / bc.elemBytes * bc.elemBytes);
  auto sendFor = [&](int g, int t, size_t off) { return bc.send + rankAt(c, g, t) * bc.blockBytes + off; };
  const bool inPlace = bc.send == bc.recv;
  bc.dev.copy(bc.block(c.rank()), sendFor(mine, i, 0), bc.blockBytes, bc.caller);  // nothing where in place
  if (k > 1 && !inPlace) {
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i) continue;
      be.send(sendFor(mine, j, 0), bc.args.count, bc.dt, j, bc.caller);
      be.recv(bc.block(rankAt(c, mine, j)), bc.args.count, bc.dt, j, bc.caller);
    }
    be.groupEnd();
  }
  const bool carrier = i < m;
  const int me = carrier ? bc.me() : -1;
  for (size_t off = 0; off < bc.blockBytes; off += piece) {
    const size_t len = std::min(piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    if (k > m) {
      // The lane's other ranks' pieces to its rank (for group h's rank t:
      // outgoingOf(h) + (u x size(h) + t) x len, u the sender's place in
      // the lane, from 1).
      Backend& be = bc.groupBackend();
      be.groupStart();
      for (int h = 0; h < groups && !carrier; ++h)
        for (int t = 0; t < size(h) && h != mine; ++t) be.send(sendFor(h, t, off), cnt, bc.dt, i % m, bc.caller);
      for (int u = 1; u < lane(mine, i) && carrier; ++u)
        for (int h = 0; h < groups; ++h)
          for (int t = 0; t < size(h) && h != mine; ++t)
            be.recv(bc.outgoingOf(h) + (u * size(h) + t) * len, cnt, bc.dt, i + u * m, bc.caller);
      be.groupEnd();
    }
    if (carrier) {
      bc.fork(bc.caller);  // the pieces handed over are in; the last piece's hand-out has read the scratch
      int slot = 0;
      const uint64_t seq = bc.take(&slot);
      bc.waitSlotFree(seq, slot, bc.outStream);
      for (int h = 0; h < groups; ++h) {
        if (h == me) continue;
        for (int t = 0; t < size(h); ++t) bc.put(b.out(me, slot, h) + t * len, sendFor(h, t, off), len, bc.outStream);
        const size_t handed = static_cast<size_t>(lane(mine, i) - 1) * size(h) * len;
        if (handed) bc.put(b.out(me, slot, h) + size(h) * len, bc.outgoingOf(h) + size(h) * len, handed, bc.outStream);
      }
      bc.dev.streamWriteValue(bc.outStream, b.ready(me, slot), seq);
      for (int q = 0; q < groups; ++q)
        if (q != me)
          bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.scratchOf(q), b.out(q, slot, me), lane(q, i) * k * len);
      bc.ackReads(seq, slot, bc.inStream);
      bc.join(bc.caller);
      for (int q = 0; q < groups; ++q)
        for (int u = 0; u < lane(q, i) && q != me; ++u)
          bc.dev.copy(bc.block(rankAt(c, q, i + u * m)) + off, bc.scratchOf(q) + (u * k + i) * len, len, bc.caller);
    }
    if (k == 1) continue;
    // Each rank of this group gets from the group's rank s < m the pieces
    // of lane s's ranks in the other groups.
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k && carrier; ++j)
      for (int q = 0; q < groups && j != i; ++q)
        for (int u = 0; u < lane(q, i) && q != mine; ++u)
          be.send(bc.scratchOf(q) + (u * k + j) * len, cnt, bc.dt, j, bc.caller);
    for (int s = 0; s < m; ++s)
      for (int q = 0; q < groups && s != i; ++q)
        for (int u = 0; u < lane(q, s) && q != mine; ++u)
          be.recv(bc.block(rankAt(c, q, s + u * m)) + off, cnt, bc.dt, s, bc.caller);
    be.groupEnd();
  }
  if (k == 1 || !inPlace) return;
  // In place, this group's blocks last, piece by piece through one part of
  // scratch (a send and a receive on one block may not overlap; the other
  // groups' blocks are in and the border steps joined, so it is free).
  uint8_t* own = b.ownStaging();
  const size_t ownPiece = std::max(bc.elemBytes, b.partBytes() / static_cast<size_t>(k) / bc.elemBytes * bc.elemBytes);
  for (size_t off = 0; off < bc.blockBytes; off += ownPiece) {
    const size_t len = std::min(ownPiece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    for (int j = 0; j < k; ++j)
      if (j != i) bc.dev.copy(own + j * len, sendFor(mine, j, off), len, bc.caller);
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i) continue;
      be.send(own + j * len, cnt, bc.dt, j, bc.caller);
      be.recv(bc.block(rankAt(c, mine, j)) + off, cnt, bc.dt, j, bc.caller);
    }
    be.groupEnd();
  }
}

}  // namespace hetccl
