#include "algorithm/device_border_allreduce.h"

#include <algorithm>
#include <string>
#include <vector>

#include "algorithm/device_exec.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

constexpr int kSlots = DeviceBorder::kSlots;

// One border all-reduce of `len` elements from src to dst (device memory;
// they may be the same), with the pieces every step needs.
struct BorderCall {
  Comm& c;
  DeviceBorder& b;
  DeviceRuntime& d;
  const hetcclKernelsApi_t& kn;
  DataType dt;
  RedKind kind;
  size_t es;
  const uint8_t* src;
  uint8_t* dst;
  size_t len;
  std::vector<Event> events;  // given back when the call is over

  int G() const { return b.peers(); }
  int me() const { return b.me(); }
  // Where peer g's part lies in device scratch (g != me).
  uint8_t* scratchOf(int g) { return b.scratch(g < me() ? g : g - 1); }

  void check(int rc, const char* what) {
    if (rc != HETCCL_KERNELS_SUCCESS)
      throwError(rc == HETCCL_KERNELS_INVALID_ARGUMENT ? hetcclInvalidArgument : hetcclUnhandledDeviceError,
                 std::string("device border: kernel '") + what + "' (" + kn.kind + "): " + kn.lastError());
  }
  Event event(Stream s) {
    Event e = c.deviceState()->takeEvent();
    events.push_back(e);
    d.recordEvent(e, s);
    return e;
  }

  // dst[0, n) = v(0) op v(1) op ... op v(G-1), left to right on every rank
  // (the same bits everywhere), where v(me) = mine and v(g) = scratchOf(g).
  // mine may be dst: then the running value stays in scratch until the last
  // step, so mine is read intact.
  void fold(uint8_t* out, const uint8_t* mine, size_t n, Stream s) {
    if (n == 0) return;
    auto v = [&](int g) -> const uint8_t* { return g == me() ? mine : scratchOf(g); };
    uint8_t* acc = (mine == out && me() != 0) ? scratchOf(0) : out;
    for (int g = 1; g < G(); ++g) {
      uint8_t* to = g == G() - 1 ? out : acc;
      check(kn.reduce(to, g == 1 ? v(0) : acc, v(g), n, static_cast<int>(dt), static_cast<int>(kind), s), "reduce");
    }
  }

  // Before slot `slot` is filled for `seq`: every reader is done with its
  // use for seq - kSlots.
  void waitSlotFree(uint64_t seq, int slot, Stream s) {
    if (seq <= kSlots) return;
    for (int q = 0; q < G(); ++q)
      if (q != me()) d.streamWaitValue(s, b.ack(me(), q, slot), seq - kSlots);
  }
  void ackReads(uint64_t seq, int slot, Stream s) {
    for (int q = 0; q < G(); ++q)
      if (q != me()) d.streamWriteValue(s, b.ack(q, me(), slot), seq);
  }

  // One round on the caller's stream: everyone's whole share out, every
  // peer's in, the fold on every rank.
  void small(Stream s) {
    const size_t bytes = len * es;
    const uint64_t seq = b.nextSeq();
    const int slot = static_cast<int>(seq % kSlots);
    waitSlotFree(seq, slot, s);
    d.copy(b.out(me(), slot), src, bytes, s);
    d.streamWriteValue(s, b.ready(me(), slot), seq);
    for (int q = 0; q < G(); ++q) {
      if (q == me()) continue;
      d.streamWaitValue(s, b.ready(q, slot), seq);
      d.copy(scratchOf(q), b.out(q, slot), bytes, s);
    }
    ackReads(seq, slot, s);
    fold(dst, src, len, s);
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
    const uint8_t* from = src + t.off * es;
    uint8_t* area = b.out(me(), t.slot);
    d.copy(area, from, t.lo(me()) * es, o);
    const size_t after = t.lo(me()) + t.cnt(me());
    d.copy(area + after * es, from + after * es, (t.n - after) * es, o);
    d.streamWriteValue(o, b.ready(me(), t.slot), t.seq);
  }
  void foldOwn(Slice& t, Stream in) {  // the part this rank owns
    const size_t lo = t.lo(me()), n = t.cnt(me());
    for (int q = 0; q < G(); ++q) {
      if (q == me()) continue;
      d.streamWaitValue(in, b.ready(q, t.slot), t.seq);
      d.copy(scratchOf(q), b.out(q, t.slot) + lo * es, n * es, in);
    }
    fold(dst + (t.off + lo) * es, src + (t.off + lo) * es, n, in);
    t.folded = event(in);
  }
  void resultOut(const Slice& t, Stream o) {
    d.streamWaitEvent(o, t.folded);
    d.copy(b.result(me(), t.slot), dst + (t.off + t.lo(me())) * es, t.cnt(me()) * es, o);
    d.streamWriteValue(o, b.done(me(), t.slot), t.seq);
  }
  void resultsIn(const Slice& t, Stream in) {
    for (int q = 0; q < G(); ++q) {
      if (q == me()) continue;
      d.streamWaitValue(in, b.done(q, t.slot), t.seq);
      d.copy(dst + (t.off + t.lo(q)) * es, b.result(q, t.slot), t.cnt(q) * es, in);
    }
    ackReads(t.seq, t.slot, in);
  }

  // Copies out on one internal stream, copies in and folds on the other,
  // slice t's results a step behind slice t + 1's parts.
  void pipelined(Stream caller) {
    Stream o = b.outStream(), in = b.inStream();
    Event start = event(caller);
    d.streamWaitEvent(o, start);
    d.streamWaitEvent(in, start);
    const size_t perPart = std::max<size_t>(1, b.partBytes() / es);
    const size_t perSlice = perPart * G();
    std::vector<Slice> slices;
    for (size_t off = 0; off < len; off += perSlice) {
      Slice t;
      t.seq = b.nextSeq();
      t.slot = static_cast<int>(t.seq % kSlots);
      t.off = off;
      t.n = std::min(perSlice, len - off);
      t.part = (t.n + G() - 1) / G();
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
    d.streamWaitEvent(caller, event(o));
    d.streamWaitEvent(caller, event(in));
  }
};

}  // namespace

bool takesDeviceBorder(Comm& c, const CollArgs& a) {
  if (!c.deviceBorder() || !c.kernels() || a.kind != CollKind::kAllReduce || a.count == 0) return false;
  if (a.op.scalarAt) return false;  // a scalar in device memory: staged (copied in stream order)
  const size_t bytes = a.count * dataTypeSize(a.dt);
  return bytes >= c.deviceBorder()->minBytes() && inPlaceOrDisjoint(a, bytes, bytes);
}

void enqueueDeviceBorderAllReduce(Comm& c, const CollArgs& a) {
  DeviceBorder& b = *c.deviceBorder();
  DeviceState& ds = *c.deviceState();
  DeviceRuntime& d = c.device();
  const hetcclKernelsApi_t& kn = *c.kernels();
  Backend& be = c.groupBackend();
  const Stream s = a.stream;
  const size_t es = dataTypeSize(a.dt), n = a.count;
  const int k = static_cast<int>(c.topo().groupOfRank(c.rank()).ranks.size());
  const int i = c.myLocal();
  auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);

  // PreMulSum and float Avg scale each input first (by the kernels: the
  // vendor library may not take PreMulSum for every type); integer Avg
  // divides once the border is done. Every other step folds the plain kind.
  const ReduceOp groupOp(a.op.kind);
  const size_t q = n / k, tail = n - q * k;
  size_t start = 0, len = n;
  const uint8_t* src = send;
  if (a.op.preMul) {
    BorderCall pre{c, b, d, kn, a.dt, RedKind::kSum, es, nullptr, nullptr, 0, {}};
    pre.check(kn.scale(recv, send, n, static_cast<int>(a.dt), a.op.scalar, s), "scale");
    src = recv;
  }
  if (k > 1) {
    // The group backend is also driven by the proxy for staged calls: its
    // calls must reach the vendor library in one order on every rank.
    ds.waitStagedDone(c.options().timeoutS, &c.abortFlag());
    start = i * q;
    len = q + (i == k - 1 ? tail : 0);
    be.groupStart();
    if (q) be.reduceScatter(src, recv + start * es, q, a.dt, groupOp, s);
    if (tail) be.allReduce(src + q * k * es, recv + q * k * es, tail, a.dt, groupOp, s);
    be.groupEnd();
    src = recv;
  }

  BorderCall bc{c, b, d, kn, a.dt, a.op.kind, es, src + start * es, recv + start * es, len, {}};
  const bool small = len * es <= std::min(c.smallBytes(), b.partBytes());
  if (len) {
    if (small) bc.small(s);
    else bc.pipelined(s);
    if (a.op.postDiv) bc.check(kn.divide(bc.dst, len, static_cast<int>(a.dt), a.op.divisor, s), "divide");
  }
  if (k > 1) {
    be.groupStart();
    if (q) be.allGather(recv + start * es, recv, q, a.dt, s);
    if (tail) be.broadcast(recv + q * k * es, recv + q * k * es, tail, a.dt, k - 1, s);
    be.groupEnd();
  }

  // The proxy watches the call end; the caller goes on.
  Event end = bc.event(s);
  std::vector<Event> events = std::move(bc.events);
  const uint64_t lastSeq = len ? b.seq() : 0;
  LOG_TRACE(kColl, "device border AllReduce of %zu bytes: share of %zu elements, last border sequence %llu",
            n * es, len, static_cast<unsigned long long>(lastSeq));
  c.proxy().submit(
      [&c, &b, end, lastSeq, small, bytes = n * es] {
        DeviceRuntime& dev = c.device();
        try {
          waitEvent(dev, end, c.options().timeoutS, &c.abortFlag(), "waiting for a device border AllReduce");
        } catch (const Error&) {
          bool poisoned = false;
          const int who = lastSeq ? b.behind(lastSeq, !small, &poisoned) : -1;  // before the release hides it
          b.releaseAll();
          if (who < 0 || c.abortFlag().load()) throw;
          throwError(hetcclRemoteError, "device border AllReduce of " + std::to_string(bytes) + " bytes: rank " +
                                            std::to_string(b.peerRank(who)) + " did not store its share within " +
                                            std::to_string(static_cast<int>(c.options().timeoutS)) +
                                            " s (HETCCL_TIMEOUT_S); it died, stalled or left the job");
        }
        bool poisoned = false;
        if (lastSeq) b.behind(lastSeq, !small, &poisoned);
        if (poisoned)
          throwError(hetcclRemoteError, "device border AllReduce: a border peer released the border (it failed "
                                        "or aborted); the result is not valid");
      },
      [&ds, events] {
        for (Event e : events) ds.giveEvent(e);
      });
}

}  // namespace hetccl
