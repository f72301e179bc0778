#include "gpu/enqueue.h"

#include <algorithm>
#include <cstring>

#include "gpu/border_coll.h"
#include "gpu/border_p2p.h"
#include "gpu/captured_call.h"
#include "gpu/staged_backend.h"
#include "gpu/staged_copies.h"
#include "gpu/vendor_calls.h"
#include "comm/comm.h"
#include "observe/observed.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

// The calls of one enqueue run on their first stream, after the
// communicator's last call (IssueOrder::leadAfterLast), and their other
// streams wait for their end, however the enqueue returns.
class InIssueOrder {
 public:
  InIssueOrder(StagingState& ds, std::vector<CollArgs>& calls) : ds_(ds) {
    for (const CollArgs& a : calls)
      if (std::find(streams_.begin(), streams_.end(), a.stream) == streams_.end()) streams_.push_back(a.stream);
    const Stream lead = ds_.order().leadAfterLast(streams_);
    for (CollArgs& a : calls) a.stream = lead;
  }
  ~InIssueOrder() {
    try {
      ds_.order().markLast(streams_);
    } catch (const std::exception& e) {  // the device failed: the call reports it
      LOG_WARN(kColl, "marking the end of a call on its streams: %s", e.what());
    }
  }
  InIssueOrder(const InIssueOrder&) = delete;
  InIssueOrder& operator=(const InIssueOrder&) = delete;

 private:
  StagingState& ds_;
  std::vector<Stream> streams_;
};

}  // namespace

// Lays out the host copies of `calls` one after the other in one pinned
// block; returns the block's size.
size_t layoutHostCopies(const Comm& c, const std::vector<CollArgs>& calls, std::vector<HostCopy>* out) {
  std::vector<HostCopy> ms(calls.size());
  size_t total = 0;
  for (size_t k = 0; k < calls.size(); ++k) {
    HostCopy& m = ms[k];
    m.user = &calls[k];
    m.host = calls[k];
    m.host.stream = nullptr;
    m.ext = callExtent(c.nranks(), c.rank(), calls[k]);
    auto* s = static_cast<const uint8_t*>(calls[k].send);
    auto* r = static_cast<const uint8_t*>(calls[k].recv);
    bool overlap = m.ext.sendBytes && m.ext.recvBytes && s < r + m.ext.recvBytes && r < s + m.ext.sendBytes;
    if (overlap) {  // in place: one copy holds both
      m.lo = std::min(s, r);
      m.bytes = static_cast<size_t>(std::max(s + m.ext.sendBytes, r + m.ext.recvBytes) - m.lo);
    } else {
      m.lo = m.ext.recvBytes ? r : nullptr;
      m.bytes = m.ext.recvBytes;
    }
    m.offset = total;
    total += (m.bytes + 255) & ~size_t{255};
    if (!overlap && m.ext.sendBytes) total += (m.ext.sendBytes + 255) & ~size_t{255};
    if (calls[k].op.scalarAt) {
      m.scalarOffset = total;
      total += 256;
    }
  }
  if (out) *out = std::move(ms);
  return std::max<size_t>(total, 1);
}

// Places the host copies in `base` (a pinned block of layoutHostCopies' size)
// and enqueues the copies in (device to host) on each call's own stream.
std::vector<HostCopy> stageIn(Comm& c, const std::vector<CollArgs>& calls, uint8_t* base) {
  std::vector<HostCopy> ms;
  layoutHostCopies(c, calls, &ms);
  DeviceRuntime& d = c.device();
  for (size_t k = 0; k < calls.size(); ++k) {
    HostCopy& m = ms[k];
    Stream st = calls[k].stream;
    auto* s = static_cast<const uint8_t*>(calls[k].send);
    auto* r = static_cast<const uint8_t*>(calls[k].recv);
    m.region = base + m.offset;
    if (calls[k].op.scalarAt) {  // the scalar as it is when the stream reaches the call
      d.copy(base + m.scalarOffset, calls[k].op.scalarAt, dataTypeSize(calls[k].dt), st);
      m.host.op.scalarAt = base + m.scalarOffset;
    }
    if (m.lo && m.lo != r) {  // overlapping: send and recv inside region
      d.copy(m.region, m.lo, m.bytes, st);
      m.host.send = m.region + (s - m.lo);
      m.host.recv = m.region + (r - m.lo);
    } else if (m.lo && m.ext.sendBytes && s >= m.lo && s < m.lo + m.bytes) {
      d.copy(m.region, m.lo, m.bytes, st);
      m.host.send = m.region + (s - m.lo);
      m.host.recv = m.region;
    } else {
      if (m.ext.recvBytes) m.host.recv = m.region;
      if (m.ext.sendBytes) {
        m.sendCopy = m.region + ((m.bytes + 255) & ~size_t{255});
        d.copy(m.sendCopy, s, m.ext.sendBytes, st);
        m.host.send = m.sendCopy;
      }
    }
  }
  return ms;
}

// Enqueues the copies out (host to device) on each call's own stream.
void stageOut(Comm& c, const std::vector<HostCopy>& ms) {
  for (const HostCopy& m : ms)
    if (m.ext.writesRecv && m.ext.recvBytes)
      c.device().copy(m.user->recv, m.host.recv, m.ext.recvBytes, m.user->stream);
}

// The proxy's part of a multi-group call: once the caller's streams have
// copied the buffers into pinned memory, run the plans there. Group steps of
// a group of several GPU ranks go through the vendor library (StagedBackend).
void runStaged(Comm& c, const std::vector<CollArgs>& host, const std::vector<Event>& ready, ChunkHooks* hooks) {
  StagingState& ds = *c.stagingState();
  DeviceRuntime& d = c.device();
  const double to = c.options().timeoutS;
  d.makeCurrent();
  for (Event e : ready)
    waitEvent(d, e, to, &c.abortFlag(), "waiting for the caller's stream to copy the buffers to pinned staging");
  StagedBackend staged(c.groupBackend(), c.groupBackend().context(), ds);
  if (c.observing()) {  // the staged plan's group steps, counted and/or on the timeline
    ObservedBackend observed(staged, c.groupBackend().context(), c.metrics(), c.tracer());
    return runCalls(PlanContext{c, observed, hooks}, host);
  }
  runCalls(PlanContext{c, staged, hooks}, host);
}

namespace {

// One AllReduce across groups that runs in chunks (allReduceChunk), in place
// or with disjoint buffers, on the caller's stream: [wait until the previous
// call's copies out are done] [copy chunk 0 in] [event 0] ... [copy chunk
// C-1 in] [event C-1] [wait for ticket 0] [copy chunk 0 out] ... [wait for
// ticket C-1] [copy chunk C-1 out]. The proxy runs chunk k once event k has
// fired and stores ticket k when it is done, so chunk k crosses the border
// while chunk k+1 is copied in and chunk k-1 copied out.
void enqueueChunkedAllReduce(Comm& c, const CollArgs& a, size_t step) {
  StagingState& ds = *c.stagingState();
  DeviceRuntime& d = c.device();
  const size_t es = dataTypeSize(a.dt), n = a.count, bytes = n * es;
  const bool inPlace = a.send == a.recv;
  const size_t recvSlot = (bytes + 255) & ~size_t{255};
  uint8_t* pinned = ds.pinned().get(0, inPlace ? recvSlot : 2 * recvSlot);
  uint8_t* hostRecv = pinned;
  uint8_t* hostSend = inPlace ? pinned : pinned + recvSlot;
  const Stream s = a.stream;
  ds.waitReleased(s);  // the block may be the previous call's
  std::vector<Event> ready;
  std::vector<uint64_t> tickets;
  for (size_t off = 0; off < n; off += step) {
    const size_t len = std::min(step, n - off) * es;
    d.copy(hostSend + off * es, static_cast<const uint8_t*>(a.send) + off * es, len, s);
    ready.push_back(ds.events().take());
    d.recordEvent(ready.back(), s);
    tickets.push_back(ds.completion().nextTicket());
  }
  ds.stagedQueued();
  auto release = [&ds, last = tickets.back(), ready] {
    ds.completion().complete(last);  // releases every wait of this call (they wait for >= their ticket)
    for (Event e : ready) ds.events().give(e);
    ds.stagedRan();
  };
  try {
    for (size_t k = 0, off = 0; off < n; ++k, off += step) {
      d.streamWaitValue(s, ds.completion().flag(), tickets[k]);
      d.copy(static_cast<uint8_t*>(a.recv) + off * es, hostRecv + off * es, std::min(step, n - off) * es, s);
    }
    ds.markReleased(s);
  } catch (...) {
    c.proxy().submit([] {}, release);
    throw;
  }
  CollArgs host = a;
  host.send = hostSend;
  host.recv = hostRecv;
  host.stream = nullptr;
  LOG_TRACE(kColl, "GPU AllReduce of %zu bytes in %zu chunks, tickets %llu..%llu", bytes, tickets.size(),
            static_cast<unsigned long long>(tickets.front()), static_cast<unsigned long long>(tickets.back()));
  c.proxy().submit(
      [&c, host, ready, tickets] {
        DeviceRuntime& dev = c.device();
        const double to = c.options().timeoutS;
        ChunkHooks hooks;
        hooks.before = [&](size_t k) {
          waitEvent(dev, ready.at(k), to, &c.abortFlag(), "waiting for the caller's stream to copy a chunk in");
        };
        hooks.after = [&](size_t k) { c.stagingState()->completion().complete(tickets.at(k)); };
        runStaged(c, {host}, {}, &hooks);
      },
      release);
}

// Whether a communicator of one group hands `calls` to the vendor library
// as one call of its own, outside a group of the library's: one collective
// that the library has, or one send or receive (NCCL runs a lone call as a
// group of one itself). Send/recv inside a group of several stays grouped
// (VendorCalls routes whole groups).
bool oneVendorCall(const Comm& c, std::span<const CollArgs> calls) {
  if (calls.size() != 1 || c.topo().ngroups() != 1) return false;
  const CollKind k = calls[0].kind;
  return k != CollKind::kAlltoAll && k != CollKind::kGather && k != CollKind::kScatter;
}

// One group: the vendor library (`be`) does it all, on the caller's stream.
// Also the send/recv between ranks of one group of several, through
// VendorCalls (peers are global ranks; the vendor library takes group
// ranks). Several calls, or one made of several of the library's, go in a
// group of the library's; a lone call goes as it is.
void passThrough(Comm& c, std::span<const CollArgs> calls, Backend& be) {
  const int n = c.nranks();
  const std::vector<int>& inGroup = c.topo().groupRank;
  const bool grouped = !oneVendorCall(c, calls);
  if (grouped) be.groupStart();
  for (const CollArgs& a : calls) {
    auto* s = static_cast<const uint8_t*>(a.send);
    auto* r = static_cast<uint8_t*>(a.recv);
    switch (a.kind) {
      case CollKind::kAllReduce: be.allReduce(s, r, a.count, a.dt, a.op, a.stream); break;
      case CollKind::kBroadcast: be.broadcast(s, r, a.count, a.dt, a.root, a.stream); break;
      case CollKind::kReduce: be.reduce(s, r, a.count, a.dt, a.op, a.root, a.stream); break;
      case CollKind::kAllGather: be.allGather(s, r, a.count, a.dt, a.stream); break;
      case CollKind::kReduceScatter: be.reduceScatter(s, r, a.count, a.dt, a.op, a.stream); break;
      case CollKind::kAlltoAll:
      case CollKind::kGather:
      case CollKind::kScatter:
        for (const CollArgs& part : pointToPointParts(a, n, c.rank())) {
          if (part.isSend)
            be.send(part.send, part.count, part.dt, part.peer, a.stream);
          else
            be.recv(part.recv, part.count, part.dt, part.peer, a.stream);
        }
        break;
      case CollKind::kSendRecv:
        if (a.count == 0) break;
        if (a.isSend)
          be.send(s, a.count, a.dt, inGroup[a.peer], a.stream);
        else
          be.recv(r, a.count, a.dt, inGroup[a.peer], a.stream);
        break;
    }
  }
  if (grouped) be.groupEnd();
}

// Send/recv with a peer of this rank's own group: the vendor library on the
// caller's stream, as in one group (NVLink/xGMI speed, no copy to pinned
// memory), or on the proxy's stream after staged calls queued there. A send to or receive from this rank itself goes
// there only with its counterpart in the same calls (NCCL matches them inside one group). Returns the other calls, in
// order.
std::vector<CollArgs> enqueueGroupPairs(Comm& c, std::vector<CollArgs> calls) {
  const Topology& t = c.topo();
  const int me = c.rank();
  auto selfSide = [&](bool isSend) {
    return std::any_of(calls.begin(), calls.end(), [&](const CollArgs& a) {
      return a.kind == CollKind::kSendRecv && a.peer == me && a.isSend == isSend;
    });
  };
  const bool selfPaired = selfSide(true) && selfSide(false);
  std::vector<CollArgs> mine, rest;
  for (CollArgs& a : calls) {
    const bool pair = a.kind == CollKind::kSendRecv && a.peer >= 0 && a.peer < c.nranks() &&
                      t.groupOf[a.peer] == t.groupOf[me] && (a.peer != me || selfPaired);
    (pair ? mine : rest).push_back(a);
  }
  if (mine.empty()) return rest;
  c.countCalls(hetcclPathNone, mine.size());
  LOG_TRACE(kColl, "send/recv inside the group: %zu call(s) to the vendor library", mine.size());
  VendorCalls vendor(c);  // after staged calls still queued on the proxy (vendor_calls.h)
  passThrough(c, mine, vendor);
  return rest;
}

// The calls of one enqueue that take the device border (collectives in
// order, then send/recv with border peers), on their stream (every call's
// since InIssueOrder), enqueued by this thread before it returns: every wait
// a stream makes is then for work some stream was already given (work that
// another thread enqueues later can sit behind that wait in a hardware
// queue the runtime gives both streams: docs/design-gpu.md).
void enqueueBorderWork(Comm& c, const std::vector<CollArgs>& border, std::vector<CollArgs> pairs) {
  c.countCalls(hetcclPathDevice, border.size() + pairs.size());
  c.stagingState()->sampler().newEnqueue();
  for (const CollArgs& a : border) enqueueDeviceBorder(c, a);
  if (!pairs.empty()) enqueueBorderPairs(c, std::move(pairs));
}

}  // namespace

// A multi-group call: its device border work (above), then send/recv inside
// the group (the vendor library), then what stages, on the caller's
// streams: [wait until the previous call's copies out are done] [copies in,
// device to pinned] [ready event] [wait until the proxy stores this call's
// ticket] [copies out, pinned to device]. All copies stay in the caller's
// stream order. The proxy's own device work is the vendor library's group
// steps in groups of several GPUs (StagedBackend, and calls sent through
// it: vendor_calls.h), on its internal stream while the caller's stream
// waits; a stream wait-value can hold up other streams that share its
// hardware queue, which groups of several real GPUs (never run here) would
// meet first.
static void enqueueEager(Comm& c, std::vector<CollArgs> calls) {
  prepareBorderPairs(c, calls);
  InIssueOrder order(*c.stagingState(), calls);
  // Collectives the device border takes go first, one after the other in
  // the caller's order (every rank's group holds the same collectives in
  // the same order, and each one's decision is the same on every rank),
  // then send/recv with border peers through the border's pair channels
  // (before the rest of their group, which waits for them on its streams).
  std::vector<CollArgs> border, pairs, rest;
  for (const CollArgs& a : calls)
    (takesDeviceBorder(c, a) ? border : takesBorderPair(c, a) ? pairs : rest).push_back(a);
  if (!border.empty() || !pairs.empty()) enqueueBorderWork(c, border, std::move(pairs));
  // Then those inside this rank's group, then what stages. Within one
  // group call each rank's streams so hold its border steps, border pairs
  // (in peer order), group pairs and staged calls in this order, and each
  // kind waits only on the same kind of its peers: no cycle between ranks
  // whatever order the group call lists them in. (Ranks that split the
  // same work into group calls differently can still order the vendor
  // library's calls differently, as with NCCL itself.)
  calls = enqueueGroupPairs(c, std::move(rest));
  if (calls.empty()) return;
  c.countCalls(hetcclPathStaged, calls.size());
  if (calls.size() == 1 && calls[0].kind == CollKind::kAllReduce) {
    const CollArgs& a = calls[0];
    const size_t step = allReduceChunk(c, a.count, a.dt);
    const size_t bytes = a.count * dataTypeSize(a.dt);
    if (step < a.count && inPlaceOrDisjoint(a, bytes, bytes) && !a.op.scalarAt)
      return enqueueChunkedAllReduce(c, a, step);
  }
  StagingState& ds = *c.stagingState();
  DeviceRuntime& d = c.device();
  const Stream s = calls.front().stream;  // every call's, since InIssueOrder
  // Pinned staging is allocated here, before any stream waits on the proxy:
  // allocating page-locked memory can synchronise the device, which from the
  // proxy (while a stream waits on it) never returns. Only this thread
  // touches the pool; an outgrown block stays allocated (StagingPool).
  uint8_t* pinned = ds.pinned().get(0, layoutHostCopies(c, calls, nullptr));
  ds.waitReleased(s);  // the block may be the one the previous call still copies out of
  std::vector<HostCopy> ms = stageIn(c, calls, pinned);
  const std::vector<Event> ready{ds.events().take()};
  d.recordEvent(ready.front(), s);
  uint64_t ticket = ds.completion().nextTicket();
  ds.stagedQueued();
  auto release = [&ds, ticket, ready] {
    ds.completion().complete(ticket);
    for (Event e : ready) ds.events().give(e);
    ds.stagedRan();
  };
  std::vector<CollArgs> host;
  try {
    d.streamWaitValue(s, ds.completion().flag(), ticket);
    stageOut(c, ms);
    ds.markReleased(s);
    for (const HostCopy& m : ms) host.push_back(m.host);
  } catch (...) {
    // Streams may already wait for this ticket: release them, in order.
    c.proxy().submit([] {}, release);
    throw;
  }
  LOG_TRACE(kColl, "GPU call ticket %llu: %zu call(s)", static_cast<unsigned long long>(ticket), calls.size());
  c.proxy().submit([&c, host = std::move(host), ready] { runStaged(c, host, ready); }, release);
}

bool enqueueDeviceCalls(Comm& c, std::span<const CollArgs> given, uint64_t record) {
  if (given.empty()) return false;
  if (c.topo().ngroups() == 1) {  // no copy of the calls: the vendor library gets them as they are
    c.countCalls(hetcclPathNone, given.size());
    passThrough(c, given, c.groupBackend());
    return false;
  }
  std::vector<CollArgs> calls(given.begin(), given.end());
  // Captured calls, and every call once one was captured, reach the proxy
  // in stream order (captured_call.h); a captured one outside the issue
  // order, which a replay could not repeat.
  const bool captured = anyCaptured(c, calls);
  if (captured || c.stagingState()->captured().captureSeen()) {
    if (captured) {
      enqueueHandedOffCalls(c, calls, true);
      return false;
    }
    InIssueOrder order(*c.stagingState(), calls);
    enqueueHandedOffCalls(c, calls, false, record);
    return record != 0;
  }
  enqueueEager(c, std::move(calls));
  return false;
}

bool inPlaceOrDisjoint(const CollArgs& a, size_t sendBytes, size_t recvBytes, size_t recvAt, size_t sendAt) {
  auto* s = static_cast<const uint8_t*>(a.send);
  auto* r = static_cast<const uint8_t*>(a.recv);
  return s + sendAt == r + recvAt || s + sendBytes <= r || r + recvBytes <= s;
}

}  // namespace hetccl
