// The device border's Gather and Scatter between groups of different sizes
// (m = the smallest group's size). One lane carries: the root's index a
// where a < m (the root's border peers), else index 0, whose rank of the
// root's group hands over to the root (or from it) through the vendor
// library. Piece by piece, a piece of every block of a group per slot use
// (partBytes over the largest group's size, whole elements).
#include <algorithm>

#include "gpu/border_block.h"

namespace hetccl {
namespace {

// What both collectives name: the carrying lane, the groups and the piece.
struct RootLane {
  explicit RootLane(BlockCall& bc) : bc(bc), c(bc.comm) {
    const int m = bc.border.shares();
    mine = c.topo().groupOf[c.rank()];
    rootGroup = bc.rootGroup();
    rootIndex = bc.rootIndex();
    lane = rootIndex < m ? rootIndex : 0;
    isRoot = c.rank() == bc.args.root;
    carrier = bc.groupIndex() == lane;
    int kmax = 1;
    for (int g = 0; g < c.topo().ngroups(); ++g) kmax = std::max(kmax, size(g));
    piece = std::max(bc.elemBytes, bc.border.partBytes() / static_cast<size_t>(kmax) / bc.elemBytes * bc.elemBytes);
  }
  int size(int g) const { return groupSizeOf(c, g); }
  // Global rank of group g's rank j.
  int at(int g, int j) const { return rankAt(c, g, j); }
  // Whether the root hands over to (or takes from) the lane's rank of its
  // own group: the root's index has no border peers.
  bool relayed() const { return lane != rootIndex; }
  // The lane's rank: one slot use in which it puts its pieces out
  // (puts(slot), on the out stream) ...
  template <typename F>
  void putOut(F puts) {
    bc.fork(bc.caller);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    bc.waitSlotFree(seq, slot, bc.outStream);
    puts(slot);
    bc.dev.streamWriteValue(bc.outStream, bc.border.ready(bc.me(), slot), seq);
    bc.ackReads(seq, slot, bc.inStream);
  }
  // ... or fetches the peers' (fetches(seq, slot), on the in stream), once
  // the last piece's hand-over has read the scratch.
  template <typename F>
  void fetchIn(F fetches) {
    bc.fork(bc.caller);
    int slot = 0;
    const uint64_t seq = bc.take(&slot);
    fetches(seq, slot);
    bc.ackReads(seq, slot, bc.inStream);
  }

  BlockCall& bc;
  Comm& c;
  int mine = 0, rootGroup = 0, rootIndex = 0, lane = 0;
  bool isRoot = false, carrier = false;
  size_t piece = 0;
};

}  // namespace

// Each other group gathers its pieces to its lane's rank (vendor), which
// puts them, k of them, in its out area; the root's group's lane rank
// fetches them all (to scratch). Where that is the root it copies them
// into place; else it sends them to the root together with its own piece,
// while the root gathers its own group's pieces.
void enqueueUnequalGather(BlockCall& bc) {
  RootLane r(bc);
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  const int groups = c.topo().ngroups(), k = r.size(r.mine), i = bc.groupIndex();
  const bool rootSide = r.mine == r.rootGroup;
  uint8_t* gathered = r.carrier && !rootSide ? b.outgoing(0) : nullptr;
  for (size_t off = 0; off < bc.blockBytes; off += r.piece) {
    const size_t len = std::min(r.piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    if (!rootSide) {
      if (r.carrier) {
        if (off) bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // the last piece is out of `gathered`
        bc.dev.copy(gathered + i * len, bc.send + off, len, bc.caller);
      }
      if (k > 1) {
        Backend& be = bc.groupBackend();
        be.groupStart();
        for (int j = 0; j < k; ++j) {
          if (j == i || (!r.carrier && j != r.lane)) continue;
          if (r.carrier)
            be.recv(gathered + j * len, cnt, bc.dt, j, bc.caller);
          else
            be.send(bc.send + off, cnt, bc.dt, j, bc.caller);
        }
        be.groupEnd();
      }
      if (r.carrier) r.putOut([&](int slot) { bc.put(b.out(bc.me(), slot), gathered, k * len, bc.outStream); });
      continue;
    }
    if (r.carrier) {
      r.fetchIn([&](uint64_t seq, int slot) {
        for (int q = 0; q < groups; ++q)
          if (q != bc.me())
            bc.readFromPeer(bc.inStream, q, seq, slot, false, bc.scratchOf(q), b.out(q, slot), r.size(q) * len);
      });
      for (int q = 0; q < groups && r.isRoot; ++q)
        for (int j = 0; j < r.size(q) && q != bc.me(); ++j)
          bc.dev.copy(bc.block(r.at(q, j)) + off, bc.scratchOf(q) + j * len, len, bc.inStream);
      bc.join(bc.caller);
    }
    if (r.isRoot) bc.dev.copy(bc.block(c.rank()) + off, bc.send + off, len, bc.caller);  // nothing where in place
    if (k == 1) continue;
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i || (!r.isRoot && j != r.rootIndex)) continue;
      if (r.isRoot)
        be.recv(bc.block(r.at(r.mine, j)) + off, cnt, bc.dt, j, bc.caller);
      else
        be.send(bc.send + off, cnt, bc.dt, j, bc.caller);
    }
    // The other groups' pieces, from the lane's rank (in group order).
    for (int q = 0; q < groups && r.relayed() && (r.isRoot || r.carrier); ++q)
      for (int j = 0; j < r.size(q) && q != r.mine; ++j) {
        if (r.isRoot)
          be.recv(bc.block(r.at(q, j)) + off, cnt, bc.dt, r.lane, bc.caller);
        else
          be.send(bc.scratchOf(q) + j * len, cnt, bc.dt, r.rootIndex, bc.caller);
      }
    be.groupEnd();
  }
  if (r.carrier) bc.join(bc.caller);
}

// The root's group: the root hands its group's ranks their pieces (vendor)
// and, where its index has no border peers, the other groups' pieces to
// its lane's rank (into outgoing scratch, one part per group); the lane's
// rank puts each group's k pieces in that group's part of its out area.
// Each other group's lane rank fetches its part and hands its group's ranks
// their pieces.
void enqueueUnequalScatter(BlockCall& bc) {
  RootLane r(bc);
  Comm& c = bc.comm;
  DeviceBorder& b = bc.border;
  const int groups = c.topo().ngroups(), k = r.size(r.mine), i = bc.groupIndex();
  const bool rootSide = r.mine == r.rootGroup;
  auto src = [&](int g, int j, size_t off) { return bc.send + r.at(g, j) * bc.blockBytes + off; };
  for (size_t off = 0; off < bc.blockBytes; off += r.piece) {
    const size_t len = std::min(r.piece, bc.blockBytes - off), cnt = len / bc.elemBytes;
    if (rootSide) {
      const bool handsOver = r.carrier && r.relayed();  // this rank takes the other groups' pieces
      if (handsOver && off)
        bc.dev.streamWaitEvent(bc.caller, bc.event(bc.outStream));  // the last piece is out of scratch
      if (k > 1) {
        Backend& be = bc.groupBackend();
        be.groupStart();
        for (int j = 0; j < k; ++j) {
          if (j == i || (!r.isRoot && j != r.rootIndex)) continue;
          if (r.isRoot)
            be.send(src(r.mine, j, off), cnt, bc.dt, j, bc.caller);
          else
            be.recv(bc.recv + off, cnt, bc.dt, j, bc.caller);
        }
        for (int q = 0; q < groups && r.relayed() && (r.isRoot || r.carrier); ++q)
          for (int j = 0; j < r.size(q) && q != r.mine; ++j) {
            if (r.isRoot)
              be.send(src(q, j, off), cnt, bc.dt, r.lane, bc.caller);
            else
              be.recv(bc.outgoingOf(q) + j * len, cnt, bc.dt, r.rootIndex, bc.caller);
          }
        be.groupEnd();
      }
      if (r.isRoot) bc.dev.copy(bc.recv + off, src(r.mine, i, off), len, bc.caller);  // nothing where in place
      if (r.carrier)
        r.putOut([&](int slot) {
          for (int h = 0; h < groups; ++h)
            for (int j = 0; j < r.size(h) && h != bc.me(); ++j)
              bc.put(b.out(bc.me(), slot, h) + j * len, r.isRoot ? src(h, j, off) : bc.outgoingOf(h) + j * len, len,
                     bc.outStream);
        });
      continue;
    }
    uint8_t* got = r.carrier ? bc.scratchOf(r.rootGroup) : nullptr;
    if (r.carrier) {
      r.fetchIn([&](uint64_t seq, int slot) {
        bc.readFromPeer(bc.inStream, r.rootGroup, seq, slot, false, got, b.out(r.rootGroup, slot, bc.me()), k * len);
      });
      bc.join(bc.caller);
      bc.dev.copy(bc.recv + off, got + i * len, len, bc.caller);
    }
    if (k == 1) continue;
    Backend& be = bc.groupBackend();
    be.groupStart();
    for (int j = 0; j < k; ++j) {
      if (j == i || (!r.carrier && j != r.lane)) continue;
      if (r.carrier)
        be.send(bc.scratchOf(r.rootGroup) + j * len, cnt, bc.dt, j, bc.caller);
      else
        be.recv(bc.recv + off, cnt, bc.dt, j, bc.caller);
    }
    be.groupEnd();
  }
  if (r.carrier) bc.join(bc.caller);
}

}  // namespace hetccl
