// The device border's collectives between groups of different sizes that
// run in lanes: lane s < m (m = the smallest group's size) of each group is
// its ranks s, s + m, ...; its rank s has border peers (the other groups'
// ranks s), the others hand their part to it or get theirs from it through
// the vendor library (algorithm/device_border_coll.h).
#include <algorithm>

#include "algorithm/device_border_block.h"

namespace hetccl {

// Groups of different sizes (m = the smallest group's size): lane s < m
// of each group carries the blocks of its ranks j with j % m == s. Inside
// each group the ranks from index m on hand their block to their lane's
// rank (vendor send/recv); the lane's border peers swap their blocks, one
// block of each peer a round (a peer with fewer sits the last rounds out);
// then each lane's rank broadcasts every block it holds inside its group.
void enqueueUnequalAllGather(BlockCall& bc) {
  Comm& c = bc.c;
  DeviceBorder& b = bc.b;
  const int m = b.shares(), i = bc.i(), me = bc.me(), G = bc.G(), groups = c.topo().ngroups();
  const int mine = c.topo().groupOf[c.rank()];
  auto size = [&](int g) { return groupSizeOf(c, g); };
  auto lane = [&](int g, int s) { return bc.laneSize(g, s); };
  if (size(mine) > 1) {
    Backend& be = bc.groupBackend();
    be.groupStart();
    if (i >= m) be.send(bc.block(c.rank()), bc.a.count, bc.dt, i % m, bc.s);
    for (int j = i + m; i < m && j < size(mine); j += m)
      be.recv(bc.block(rankAt(c, mine, j)), bc.a.count, bc.dt, j, bc.s);
    be.groupEnd();
  }
  if (i < m) {
    int rounds = 0;
    for (int g = 0; g < groups; ++g) rounds = std::max(rounds, lane(g, i));
    bc.fork(bc.s);
    for (int t = 0; t < rounds; ++t) {
      for (size_t off = 0, piece = b.partBytes() * G; off < bc.blk; off += piece) {
        const size_t len = std::min(piece, bc.blk - off);
        int slot = 0;
        const uint64_t seq = bc.take(&slot);
        if (t < lane(me, i)) {
          bc.waitSlotFree(seq, slot, bc.o);
          bc.put(b.out(me, slot), bc.block(rankAt(c, me, i + t * m)) + off, len, bc.o);
          bc.d.streamWriteValue(bc.o, b.ready(me, slot), seq);
        }
        for (int q = 0; q < G; ++q)
          if (q != me && t < lane(q, i))
            bc.fetch(bc.in, q, seq, slot, false, bc.block(rankAt(c, q, i + t * m)) + off, b.out(q, slot), len);
        bc.ackReads(seq, slot, bc.in);
      }
    }
    bc.join(bc.s);
  }
  if (size(mine) == 1) return;
  Backend& be = bc.groupBackend();
  be.groupStart();
  for (int g = 0; g < groups; ++g)
    for (int j = 0; j < size(g); ++j) {
      uint8_t* at = bc.block(rankAt(c, g, j));
      be.broadcast(at, at, bc.a.count, bc.dt, j % m, bc.s);
    }
  be.groupEnd();
}

// Groups of different sizes (m = the smallest group's size; no PreMulSum):
// lane s < m of each group reduces, for the ranks of the other groups, the
// blocks of their ranks j with j % m == s, one such rank a round. A round,
// piece by piece: the vendor library reduces inside each group to each
// lane's rank the blocks of that round's ranks in the other groups (into
// outgoing scratch); the lane's border peers swap them; the lane's rank
// folds what came with its own block for its own group's rank of the
// round; the vendor library reduces that rank's block inside the group to
// it, the lane's rank giving the fold instead of its block.
void enqueueUnequalReduceScatter(BlockCall& bc) {
  Comm& c = bc.c;
  DeviceBorder& b = bc.b;
  const int m = b.shares(), i = bc.i(), me = bc.me(), groups = c.topo().ngroups();
  const int mine = c.topo().groupOf[c.rank()];
  auto size = [&](int g) { return groupSizeOf(c, g); };
  auto lane = [&](int g, int s) { return bc.laneSize(g, s); };
  auto src = [&](int g, int j, size_t off) { return bc.send + rankAt(c, g, j) * bc.blk + off; };
  int rounds = 0, laneRounds = 0;
  for (int g = 0; g < groups; ++g) {
    rounds = std::max(rounds, lane(g, 0));
    if (i < m) laneRounds = std::max(laneRounds, lane(g, i));
  }
  const bool several = size(mine) > 1;
  const ReduceOp op(bc.kind);
  for (int t = 0; t < rounds; ++t)
    for (size_t off = 0; off < bc.blk; off += b.partBytes()) {
      const size_t len = std::min(b.partBytes(), bc.blk - off), cnt = len / bc.es;
      const bool crosses = i < m && t < laneRounds;
      if (several) {
        if (crosses && (t || off)) bc.d.streamWaitEvent(bc.s, bc.event(bc.o));  // outgoing scratch is out
        Backend& be = bc.groupBackend();
        be.groupStart();
        for (int s = 0; s < m; ++s)
          for (int h = 0; h < groups; ++h)
            if (h != mine && t < lane(h, s)) {
              const uint8_t* from = src(h, s + t * m, off);
              // Written at the lane's rank only.
              be.reduce(from, s == i ? bc.outgoingOf(h) : const_cast<uint8_t*>(from), cnt, bc.dt, op, s, bc.s);
            }
        be.groupEnd();
      }
      const bool arrives = i < m && t < lane(mine, i);  // this round has a rank in this lane here
      // The fold for this group's rank of the round: straight into the
      // receive buffer where that is this rank (a group of one).
      uint8_t* folded = several ? b.outgoing(0) : bc.recv + off;
      if (crosses) {
        bc.fork(bc.s);
        int slot = 0;
        const uint64_t seq = bc.take(&slot);
        bc.waitSlotFree(seq, slot, bc.o);
        for (int p = 0; p < bc.G(); ++p)
          if (p != me && t < lane(p, i))
            bc.put(b.out(me, slot, p), several ? bc.outgoingOf(p) : src(p, i + t * m, off), len, bc.o);
        bc.d.streamWriteValue(bc.o, b.ready(me, slot), seq);
        if (arrives) {
          bc.d.streamWaitValue(bc.in, b.ready(me, slot), seq);  // outgoing scratch is out: the fold goes there
          for (int q = 0; q < bc.G(); ++q)
            if (q != me) bc.fetch(bc.in, q, seq, slot, false, bc.scratchOf(q), b.out(q, slot, me), len);
        }
        bc.ackReads(seq, slot, bc.in);
        if (arrives) bc.fold(folded, src(mine, i + t * m, off), cnt, bc.in);
        bc.join(bc.s);
      }
      if (!several) continue;
      Backend& be = bc.groupBackend();
      be.groupStart();
      for (int s = 0; s < m; ++s) {
        if (t >= lane(mine, s)) continue;
        const int j = s + t * m;
        const uint8_t* from = s == i ? folded : src(mine, j, off);
        be.reduce(from, j == i ? bc.recv + off : const_cast<uint8_t*>(from), cnt, bc.dt, op, j, bc.s);
      }
      be.groupEnd();
    }
  bc.divide(bc.recv, bc.s);
}

}  // namespace hetccl
