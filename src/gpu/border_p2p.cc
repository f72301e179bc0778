#include "gpu/border_p2p.h"

#include <algorithm>

#include "gpu/border_call.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

constexpr int kSlots = DeviceBorder::kSlots;

// The send/recv channel with global rank `peer`, or null (it stages: both
// ends decide alike). onHost: only a channel on this host (none is made).
PairChannel* channelWith(Comm& c, int peer, bool onHost = false) {
  DeviceBorder* b = c.deviceBorder();
  if (!b || peer < 0 || peer >= c.nranks() || peer == c.rank()) return nullptr;
  return onHost ? b->localPair(peer) : b->pair(peer);
}

// Every send and receive of `calls` (not empty) with a peer that has a
// channel on this host (whichever path its size takes, so that sizes on
// both sides of HETCCL_GPU_BORDER_MIN are caught too) against the peer's
// log of it; across hosts the pair relay checks every part. Where a send and its
// receive differ in size, the second of the two ends to get here fails
// its communicator (which releases the flags the first's streams wait on
// for it, so the first's call, or its next call or
// hetcclCommGetAsyncError, fails naming this reason) and the call.
void checkSizes(Comm& c, const std::vector<CollArgs>& calls) {
  for (const CollArgs& a : calls) {
    if (a.kind != CollKind::kSendRecv || a.count == 0) continue;  // an empty one is nothing either way
    PairChannel* chp = channelWith(c, a.peer, true);
    if (!chp) continue;
    PairChannel& ch = *chp;
    const uint64_t bytes = a.count * dataTypeSize(a.dt), n = a.isSend ? ++ch.sentMsgs : ++ch.receivedMsgs;
    const std::optional<uint64_t> theirs = pairLogCheck(ch.ownLog, ch.peerLog, a.isSend, n, bytes);
    if (!theirs || *theirs == bytes) continue;
    const uint64_t send = a.isSend ? bytes : *theirs, recv = a.isSend ? *theirs : bytes;
    const std::string text = std::string("send/recv ") + (a.isSend ? "to" : "from") + " rank " +
                             std::to_string(a.peer) + " (this host): a send of " + std::to_string(send) +
                             " bytes meets a receive of " + std::to_string(recv) + " bytes (message " +
                             std::to_string(n) + " of the pair's traffic that way)";
    c.fail(hetcclInvalidUsage, "rank " + std::to_string(c.rank()) + ": " + text);
    throwError(hetcclInvalidUsage, text);
  }
}

struct PairWait {
  const PairChannel* ch;
  uint64_t sent, received;
};

}  // namespace

bool takesBorderPair(Comm& c, const CollArgs& a) {
  if (a.kind != CollKind::kSendRecv || !c.deviceBorder() || !c.kernels() || a.count == 0) return false;
  return a.count * dataTypeSize(a.dt) >= c.deviceBorder()->minBytes() && channelWith(c, a.peer);
}

void prepareBorderPairs(Comm& c, const std::vector<CollArgs>& calls) {
  checkSizes(c, calls);
  for (const CollArgs& a : calls) (void)takesBorderPair(c, a);
}

std::vector<CollArgs> enqueueBorderPairs(Comm& c, std::vector<CollArgs> calls) {
  std::vector<CollArgs> mine, rest;
  for (CollArgs& a : calls) (takesBorderPair(c, a) ? mine : rest).push_back(a);
  if (mine.empty()) return rest;
  // Every rank's out stream takes its sends, and its in stream its
  // receives, in ascending peer order (a peer's own in the user's order).
  // A send waits for its reader once the channel's slots are full; in this
  // order a blocked sender always waits on a reader that waits on a lower
  // sender, so the waits of one group call form no cycle, whatever order
  // the user listed them in.
  std::stable_sort(mine.begin(), mine.end(), [](const CollArgs& x, const CollArgs& y) { return x.peer < y.peer; });
  size_t largest = 0;
  for (const CollArgs& a : mine) largest = std::max(largest, a.count * dataTypeSize(a.dt));
  BorderCall bc(c, mine[0].dt, RedKind::kSum, largest);
  DeviceBorder& b = bc.border;
  DeviceRuntime& d = bc.dev;
  const Stream o = b.outStream(), in = b.inStream();
  const Stream caller = mine.front().stream;  // every call's, since IssueOrder (enqueue.cc)
  bc.fork(caller);
  std::vector<PairWait> waits;
  size_t bytes = 0;
  for (const CollArgs& a : mine) {
    PairChannel& ch = *channelWith(c, a.peer);
    const size_t total = a.count * dataTypeSize(a.dt), piece = ch.partBytes;
    bytes += total;
    for (size_t off = 0; off < total; off += piece) {
      const size_t len = std::min(piece, total - off);
      if (a.isSend) {
        const uint64_t n = ++ch.sent;
        const int slot = static_cast<int>(n % kSlots);
        if (n > kSlots) d.streamWaitValue(o, ch.outAck[slot], n - kSlots);  // the reader is done with it
        bc.put(ch.outData[slot], static_cast<const uint8_t*>(a.send) + off, len, o);
        d.streamWriteValue(o, ch.outReady[slot], n);
        b.announce(ch, true, len, total);
      } else {
        const uint64_t n = ++ch.received;
        const int slot = static_cast<int>(n % kSlots);
        d.streamWaitValue(in, ch.inReady[slot], n);
        d.copy(static_cast<uint8_t*>(a.recv) + off, ch.inData[slot], len, in);
        d.streamWriteValue(in, ch.inAck[slot], n);
        b.announce(ch, false, len, total);
      }
    }
    if (std::none_of(waits.begin(), waits.end(), [&](const PairWait& w) { return w.ch == &ch; }))
      waits.push_back(PairWait{&ch, 0, 0});
  }
  for (PairWait& w : waits) {
    w.sent = w.ch->sent;
    w.received = w.ch->received;
  }
  bc.join(caller);
  LOG_TRACE(kColl, "device border send/recv: %zu call(s), %zu bytes, %zu peer(s)", mine.size(), bytes, waits.size());
  const DeviceBorder& border = b;
  bc.watch(caller, mine.size() == 1 ? (mine[0].isSend ? "Send" : "Recv") : "send/recv group", bytes,
           [&border, waits](bool* poisoned) {
             *poisoned = false;
             int who = -1;
             for (const PairWait& w : waits) {
               bool p = false;
               if (border.pairBehind(*w.ch, w.sent, w.received, &p) && who < 0) who = w.ch->peer;
               *poisoned = *poisoned || p;
             }
             return who;
           });
  return rest;
}

}  // namespace hetccl
