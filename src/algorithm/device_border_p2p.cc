#include "algorithm/device_border_p2p.h"

#include <algorithm>

#include "algorithm/device_border_call.h"
#include "comm/comm.h"
#include "core/log.h"

namespace hetccl {
namespace {

constexpr int kSlots = DeviceBorder::kSlots;

// The border peer index of global rank `peer`, or -1 where it is not a
// border peer of this rank on this host (pair channels are not relayed
// across hosts: such pairs stage, as both ends decide alike).
int borderIndex(Comm& c, int peer) {
  const DeviceBorder* b = c.deviceBorder();
  if (!b || peer < 0 || peer >= c.nranks() || peer == c.rank()) return -1;
  for (int g = 0; g < b->peers(); ++g)
    if (g != b->me() && b->peerRank(g) == peer) return b->remote(g) ? -1 : g;
  return -1;
}

struct PairWait {
  int g;
  uint64_t sent, received;
};

}  // namespace

bool takesBorderPair(Comm& c, const CollArgs& a) {
  if (a.kind != CollKind::kSendRecv || !c.deviceBorder() || !c.kernels() || a.count == 0) return false;
  return a.count * dataTypeSize(a.dt) >= c.deviceBorder()->minBytes() && borderIndex(c, a.peer) >= 0;
}

std::vector<CollArgs> enqueueBorderPairs(Comm& c, std::vector<CollArgs> calls) {
  std::vector<CollArgs> mine, rest;
  for (CollArgs& a : calls) (takesBorderPair(c, a) ? mine : rest).push_back(a);
  if (mine.empty()) return rest;
  BorderCall bc(c, mine[0].dt, RedKind::kSum);
  DeviceBorder& b = bc.b;
  DeviceRuntime& d = bc.d;
  const Stream o = b.outStream(), in = b.inStream();
  const int me = b.me();
  std::vector<Stream> streams;
  for (const CollArgs& a : mine)
    if (std::find(streams.begin(), streams.end(), a.stream) == streams.end()) streams.push_back(a.stream);
  for (Stream s : streams) bc.fork(s);
  std::vector<PairWait> waits;
  size_t bytes = 0;
  for (const CollArgs& a : mine) {
    const int g = borderIndex(c, a.peer);
    const size_t total = a.count * dataTypeSize(a.dt), piece = b.partBytes();
    bytes += total;
    for (size_t off = 0; off < total; off += piece) {
      const size_t len = std::min(piece, total - off);
      if (a.isSend) {
        const uint64_t n = b.nextSend(g);
        const int slot = static_cast<int>(n % kSlots);
        if (n > kSlots) d.streamWaitValue(o, b.pairAck(me, g, slot), n - kSlots);  // the reader is done with it
        bc.put(b.pairData(me, g, slot), static_cast<const uint8_t*>(a.send) + off, len, o);
        d.streamWriteValue(o, b.pairReady(me, g, slot), n);
      } else {
        const uint64_t n = b.nextRecv(g);
        const int slot = static_cast<int>(n % kSlots);
        d.streamWaitValue(in, b.pairReady(g, me, slot), n);
        d.copy(static_cast<uint8_t*>(a.recv) + off, b.pairData(g, me, slot), len, in);
        d.streamWriteValue(in, b.pairAck(g, me, slot), n);
      }
    }
    auto w = std::find_if(waits.begin(), waits.end(), [g](const PairWait& x) { return x.g == g; });
    if (w == waits.end()) waits.push_back(PairWait{g, 0, 0});
  }
  for (PairWait& w : waits) {
    w.sent = b.sent(w.g);
    w.received = b.received(w.g);
  }
  for (Stream s : streams) bc.join(s);
  LOG_TRACE(kColl, "device border send/recv: %zu call(s), %zu bytes, %zu peer(s)", mine.size(), bytes, waits.size());
  DeviceBorder& border = b;
  bc.watch(streams[0], mine.size() == 1 ? (mine[0].isSend ? "Send" : "Recv") : "send/recv group", bytes,
           [&border, waits](bool* poisoned) {
             *poisoned = false;
             int who = -1;
             for (const PairWait& w : waits) {
               bool p = false;
               const int late = border.pairBehind(w.g, w.sent, w.received, &p);
               if (who < 0) who = late;
               *poisoned = *poisoned || p;
             }
             return who;
           });
  return rest;
}

}  // namespace hetccl
