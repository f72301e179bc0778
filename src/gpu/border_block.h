// What the device border's collectives (device_border_coll.cc, and those
// of groups of different sizes, device_border_unequal.cc) share: the call
// with its buffers and steps, and the group layout's facts.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "algorithm/coll.h"
#include "gpu/border_call.h"
#include "gpu/enqueue.h"
#include "gpu/vendor_calls.h"
#include "comm/comm.h"

namespace hetccl {

inline int groupSize(Comm& c) { return static_cast<int>(c.topo().groupOfRank(c.rank()).ranks.size()); }
inline int groupSizeOf(Comm& c, int g) { return static_cast<int>(c.topo().groups[g].ranks.size()); }

// Whether the groups differ in size (then m = the smallest group's size
// shares; border/device_border.h). The same answer on every rank.
inline bool unequalGroups(Comm& c) {
  for (int g = 0; g < c.topo().ngroups(); ++g)
    if (groupSizeOf(c, g) != c.deviceBorder()->shares()) return true;
  return false;
}

// Global rank of group g's rank with index i.
inline int rankAt(Comm& c, int g, int i) { return c.topo().groups[g].ranks[i]; }

// The bytes of a call's largest buffer (whether it is timed).
inline size_t largestBuffer(Comm& c, const CollArgs& a) {
  const CallExtent e = callExtent(c.nranks(), c.rank(), a);
  return std::max(e.sendBytes, e.recvBytes);
}

// One collective over the border, with what every step names: the caller's
// stream, the block (count elements: per rank, or the whole buffer), the
// buffers, the internal streams and the border sequence before the call.
struct BlockCall : BorderCall {
  BlockCall(Comm& owner, const CollArgs& call, RedKind k)
      : BorderCall(owner, call.dt, k, largestBuffer(owner, call)),
        args(call),
        caller(call.stream),
        blockBytes(call.count * elemBytes),
        send(static_cast<const uint8_t*>(call.send)),
        recv(static_cast<uint8_t*>(call.recv)),
        outStream(border.outStream()),
        inStream(border.inStream()),
        firstSeq(border.seq()),
        vendor(owner) {
    callStart = startCall(caller);  // made first thing in each collective below
  }
  const CollArgs& args;
  Stream caller;
  size_t blockBytes;
  const uint8_t* send;
  uint8_t* recv;
  Stream outStream, inStream;
  uint64_t firstSeq;
  VendorCalls vendor;

  int groupRanks() { return groupSize(comm); }
  int groupIndex() { return comm.groupRank(); }
  // The receive block of global rank r.
  uint8_t* block(int r) { return recv + r * blockBytes; }
  // The group's steps: to the vendor library from this thread, or through
  // the proxy after staged calls still queued there (vendor_calls.h).
  Backend& groupBackend() { return vendor; }
  // The op of the group steps: a PreMulSum (float Avg too) scales there,
  // by the vendor library; the border then sums. Else the plain kind.
  ReduceOp groupOp() { return args.op.preMul ? args.op : ReduceOp(kind); }
  // Where peer g's outgoing part lies in device scratch (g != me).
  uint8_t* outgoingOf(int g) { return border.outgoing(g < me() ? g : g - 1); }
  // Integer Avg: the division once the folds are done (on the in stream).
  void divide(uint8_t* buf) { divide(buf, inStream); }
  void divide(uint8_t* buf, Stream st) {
    if (args.op.postDiv) check(kernels.divide(buf, args.count, static_cast<int>(dt), args.op.divisor, st), "divide");
  }
  void finish(const char* what, size_t bytes, int writer = -1) { watch(caller, what, bytes, firstSeq, writer, false); }
  // Groups of one rank: the send block for group g's rank.
  const uint8_t* sendTo(int g) { return send + rankAt(comm, g, 0) * blockBytes; }
  // One slot use in which every border peer but the root's puts its piece
  // [from, from + len) out, and the root's copies peer q's into to(q)
  // (Reduce, Gather).
  template <typename To>
  void toRoot(bool atRoot, const uint8_t* from, size_t len, To to) {
    int slot = 0;
    const uint64_t seq = take(&slot);
    if (!atRoot) {
      waitSlotFree(seq, slot, outStream);
      put(border.out(me(), slot), from, len, outStream);
      dev.streamWriteValue(outStream, border.ready(me(), slot), seq);
    } else {
      for (int q = 0; q < peers(); ++q) {
        if (q == me()) continue;
        readFromPeer(inStream, q, seq, slot, false, to(q), border.out(q, slot), len);
      }
    }
    ackReads(seq, slot, inStream);
  }
  // Groups of several ranks: a piece of every block per slot use, a part
  // over k (whole elements); the root's group and index in its group.
  size_t groupPiece() { return std::max(elemBytes, border.partBytes() / groupRanks() / elemBytes * elemBytes); }
  int rootGroup() { return comm.topo().groupOf[args.root]; }
  // Groups of different sizes (m = b.shares()): lane s < m of group g holds
  // its ranks s, s + m, ...; how many.
  int laneSize(int g, int s) { return (groupSizeOf(comm, g) - s + border.shares() - 1) / border.shares(); }
  int rootIndex() { return comm.topo().groupRank[args.root]; }
  // The internal streams take over, and f(offset, length) runs for every
  // piece of the block.
  template <typename F>
  void pieces(size_t piece, F f) {
    fork(caller);
    for (size_t off = 0; off < blockBytes; off += piece) f(off, std::min(piece, blockBytes - off));
  }
};

// Groups of different sizes, in lanes of rank index mod the smallest
// group's size (device_border_unequal.cc).
void enqueueUnequalAllGather(BlockCall& bc);
void enqueueUnequalReduceScatter(BlockCall& bc);
void enqueueUnequalAlltoAll(BlockCall& bc);
// Groups of different sizes, in one lane: the root's index where it has
// border peers, else 0 (device_border_unequal_root.cc).
void enqueueUnequalGather(BlockCall& bc);
void enqueueUnequalScatter(BlockCall& bc);

}  // namespace hetccl
