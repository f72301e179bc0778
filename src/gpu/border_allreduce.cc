#include "gpu/border_allreduce.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpu/border_call.h"
#include "gpu/enqueue.h"
#include "gpu/vendor_calls.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

// The largest share whose round runs as one kernel: its one block reads
// the peers' shares from host memory a few elements per thread, each read a
// round trip over the bus, so larger shares go faster by the copy engines
// (measured on the H200 under MPS: docs/performance.md).
constexpr size_t kRoundMaxBytes = size_t{16} << 10;

// One border all-reduce of `len` elements from src to dst (device memory;
// they may be the same).
struct BorderAllReduce : BorderCall {
  BorderAllReduce(Comm& owner, DataType type, RedKind k, const uint8_t* from, uint8_t* to, size_t n, size_t callBytes)
      : BorderCall(owner, type, k, callBytes), src(from), dst(to), len(n) {}
  const uint8_t* src;
  uint8_t* dst;
  size_t len;

  // One round on the caller's stream: everyone's whole share out, every
  // peer's in, the fold on every rank.
  void small(Stream s) {
    markStart(s);
    const size_t bytes = len * elemBytes;
    int slot = 0;
    const uint64_t seq = take(&slot);
    if (border.roundKernel() && bytes <= kRoundMaxBytes) return round(seq, slot, s);
    waitSlotFree(seq, slot, s);
    put(border.out(me(), slot), src, bytes, s);
    dev.streamWriteValue(s, border.ready(me(), slot), seq);
    for (int q = 0; q < peers(); ++q) {
      if (q == me()) continue;
      readFromPeer(s, q, seq, slot, false, scratchOf(q), border.out(q, slot), bytes);
    }
    ackReads(seq, slot, s);
    fold(dst, src, len, s);
  }

  // The same round as one kernel (DeviceBorder::roundKernel): the same
  // slot, flags and values, so peers of either kind meet in it.
  void round(uint64_t seq, int slot, Stream s) {
    auto flagAt = [&](int owner, volatile uint64_t* f) {
      return reinterpret_cast<unsigned long long*>(const_cast<uint64_t*>(border.onDevice(owner, f)));
    };
    hetcclBorderRound_t r{};
    r.peers = peers();
    r.me = me();
    r.seq = seq;
    r.slotFree = seq > DeviceBorder::kSlots ? seq - DeviceBorder::kSlots : 0;
    for (int q = 0; q < peers(); ++q) {
      r.out[q] = border.onDevice(q, border.out(q, slot));
      r.ready[q] = flagAt(q, border.ready(q, slot));
      if (q == me()) continue;
      r.ackIn[q] = flagAt(me(), border.ack(me(), q, slot));
      r.ackOut[q] = flagAt(q, border.ack(q, me(), slot));
    }
    sent += len * elemBytes;  // the kernel stores this rank's share in its slot
    check(kernels.borderRound(&r, dst, src, len, static_cast<int>(dt), static_cast<int>(kind), s), "borderRound");
  }

  // Slices of G parts; part p of a slice is folded by peer p.
  struct Slice {
    uint64_t seq;
    int slot;
    size_t off, n, part;  // elements: where in the share, how many, per part
    Event folded = nullptr;
    size_t lo(int p) const { return std::min(n, p * part); }
    size_t cnt(int p) const { return std::min(n, (p + 1) * part) - lo(p); }
  };

  void copyOut(const Slice& t, Stream o) {  // parts the others own
    waitSlotFree(t.seq, t.slot, o);
    const uint8_t* from = src + t.off * elemBytes;
    uint8_t* area = border.out(me(), t.slot);
    put(area, from, t.lo(me()) * elemBytes, o);
    const size_t after = t.lo(me()) + t.cnt(me());
    put(area + after * elemBytes, from + after * elemBytes, (t.n - after) * elemBytes, o);
    dev.streamWriteValue(o, border.ready(me(), t.slot), t.seq);
  }
  void foldOwn(Slice& t, Stream in) {  // the part this rank owns
    const size_t lo = t.lo(me()), n = t.cnt(me());
    for (int q = 0; q < peers(); ++q) {
      if (q == me()) continue;
      readFromPeer(in, q, t.seq, t.slot, false, scratchOf(q), border.out(q, t.slot) + lo * elemBytes, n * elemBytes);
    }
    fold(dst + (t.off + lo) * elemBytes, src + (t.off + lo) * elemBytes, n, in);
    t.folded = event(in);
  }
  void resultOut(const Slice& t, Stream o) {
    dev.streamWaitEvent(o, t.folded);
    put(border.result(me(), t.slot), dst + (t.off + t.lo(me())) * elemBytes, t.cnt(me()) * elemBytes, o);
    dev.streamWriteValue(o, border.done(me(), t.slot), t.seq);
  }
  void resultsIn(const Slice& t, Stream in) {
    for (int q = 0; q < peers(); ++q) {
      if (q == me()) continue;
      readFromPeer(in, q, t.seq, t.slot, true, dst + (t.off + t.lo(q)) * elemBytes, border.result(q, t.slot),
                   t.cnt(q) * elemBytes);
    }
    ackReads(t.seq, t.slot, in);
  }

  // Copies out on one internal stream, copies in and folds on the other,
  // slice t's results a step behind slice t + 1's parts.
  void pipelined(Stream caller) {
    Stream o = border.outStream(), in = border.inStream();
    fork(caller);
    const size_t perPart = std::max<size_t>(1, border.partBytes() / elemBytes);
    const size_t perSlice = perPart * peers();
    std::vector<Slice> slices;
    for (size_t off = 0; off < len; off += perSlice) {
      Slice t;
      t.seq = take(&t.slot);
      t.off = off;
      t.n = std::min(perSlice, len - off);
      t.part = (t.n + peers() - 1) / peers();
      slices.push_back(t);
    }
    for (size_t t = 0; t <= slices.size(); ++t) {
      if (t < slices.size()) {
        copyOut(slices[t], o);
        foldOwn(slices[t], in);
      }
      if (t >= 1) {
        resultOut(slices[t - 1], o);
        resultsIn(slices[t - 1], in);
      }
    }
    join(caller);
  }
};

}  // namespace

void enqueueDeviceBorderAllReduce(Comm& c, const CollArgs& a) {
  DeviceBorder& b = *c.deviceBorder();
  const hetcclKernelsApi_t& kn = *c.kernels();
  VendorCalls be(c);  // the group's steps (vendor_calls.h)
  const Stream s = a.stream;
  const size_t es = dataTypeSize(a.dt), n = a.count;
  const int k = static_cast<int>(c.topo().groupOfRank(c.rank()).ranks.size());
  const int i = c.groupRank();
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  // The call's timed start, held (and given back should a step below
  // throw) until the watch of the call takes it.
  BorderCall holder(c, a.dt, a.op.kind, n * es);
  holder.callStart = holder.startCall(s);

  // PreMulSum and float Avg scale each input first (by the kernels: the
  // vendor library may not take PreMulSum for every type); integer Avg
  // divides once the border is done. Every other step folds the plain kind.
  const ReduceOp groupOp(a.op.kind);
  // m shares, m the smallest group's size: share s (the last one with the
  // tail) crosses between the groups' ranks of index s; in a larger group
  // the ranks from index m on take part in the group steps only.
  const int m = b.shares();
  const size_t q = n / m, tail = n - q * m;
  auto shareLen = [&](int sh) { return q + (sh == m - 1 ? tail : 0); };
  auto broadcastShares = [&] {  // each share from the group's rank that carried it
    for (int sh = 0; sh < m; ++sh)
      if (shareLen(sh)) be.broadcast(recv + sh * q * es, recv + sh * q * es, shareLen(sh), a.dt, sh, s);
  };
  size_t start = 0, len = n;
  const uint8_t* src = send;
  if (a.op.preMul) {
    holder.check(kn.scale(recv, send, n, static_cast<int>(a.dt), a.op.scalar, s), "scale");
    src = recv;
  }
  if (k > 1) {
    start = i < m ? i * q : 0;
    len = i < m ? shareLen(i) : 0;
    be.groupStart();
    if (k == m) {
      if (q) be.reduceScatter(src, recv + start * es, q, a.dt, groupOp, s);
      if (tail) be.allReduce(src + q * k * es, recv + q * k * es, tail, a.dt, groupOp, s);
    } else {
      for (int sh = 0; sh < m; ++sh)  // share sh to the group's rank sh
        if (shareLen(sh)) be.reduce(src + sh * q * es, recv + sh * q * es, shareLen(sh), a.dt, groupOp, sh, s);
    }
    be.groupEnd();
    src = recv;
  }
  if (!b.hasPeers()) {  // index m or above: the group's steps only
    be.groupStart();
    broadcastShares();
    be.groupEnd();
    // Nothing of the border to wait for; a failure elsewhere still makes
    // the result invalid (the failure word).
    holder.watch(s, "AllReduce", n * es, [](bool* poisoned) {
      *poisoned = false;
      return -1;
    });
    return;
  }

  const uint64_t firstSeq = b.seq();
  BorderAllReduce bc(c, a.dt, a.op.kind, src + start * es, recv + start * es, len, n * es);
  bc.callStart = std::exchange(holder.callStart, nullptr);
  const bool small = len * es <= std::min(c.smallBytes(), b.partBytes());
  if (len) {
    if (small)
      bc.small(s);
    else
      bc.pipelined(s);
    if (a.op.postDiv) bc.check(kn.divide(bc.dst, len, static_cast<int>(a.dt), a.op.divisor, s), "divide");
  }
  if (k > 1) {
    be.groupStart();
    if (k == m) {
      if (q) be.allGather(recv + start * es, recv, q, a.dt, s);
      if (tail) be.broadcast(recv + q * k * es, recv + q * k * es, tail, a.dt, k - 1, s);
    } else {
      broadcastShares();
    }
    be.groupEnd();
  }
  bc.watch(s, "AllReduce", n * es, firstSeq, -1, !small);
}

}  // namespace hetccl
