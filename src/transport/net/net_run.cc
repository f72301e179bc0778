// NetTransport::run: every peer's send and receive lanes driven together
// until each transfer is done. A lane keeps its connection's requests in the
// order posted (a request the plugin could not take yet is retried before
// any later one), at most kSlots in flight, each on its own staging slot.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "core/error.h"
#include "elements/host_reduce.h"
#include "secure/message_cipher.h"
#include "transport/net/net_abi.h"
#include "transport/sealed_links.h"
#include "transport/net/net_transport.h"
#include "transport/progress.h"

namespace hetccl {
namespace {

int wireTag(uint64_t msg, uint32_t part) { return static_cast<int>(((msg & 0x3FFF) << 16) | (part & 0xFFFF)); }

}  // namespace

struct NetTransport::Op {
  Xfer* x = nullptr;
  int slot = -1;
  uint32_t part = 0;  // 0: the header
  uint64_t msg = 0;
  size_t off = 0;    // payload offset
  size_t plain = 0;  // plaintext bytes
  size_t wire = 0;   // bytes on the wire (sealed or not)
  void* req = nullptr;
  bool posted = false;
  bool received = false;  // recv: the data is in the slot, a flush may follow
  void* flushReq = nullptr;
  bool last = false;  // send: the transfer's last request
};

struct NetTransport::Run {
  struct Lane {
    std::deque<Xfer*> q;  // transfers whose requests are not all posted yet
    std::deque<Op> ops;   // posted or about to be, in order
    std::vector<int> freeSlots;
    uint32_t nextPart = 0;                             // of q.front(): 0 the header, then payload parts from 1
    bool headerPosted = false, headerChecked = false;  // recv: q.front()'s header
    uint64_t msg = 0;
  };
  std::vector<Lane> send, recv;  // by peer index
  size_t pending = 0;            // transfers not done
  mutable std::chrono::steady_clock::time_point lastAliveCheck = std::chrono::steady_clock::now();
  // A peer found exited while the run waits on it: named only if the next
  // check (after another pass over the requests) still finds it so, as what
  // it sent before it exited may not have been tested yet.
  mutable int exitedPeer = -1;
};

void NetTransport::failed(const char* call, int r, const Peer& p, const Xfer& x, bool sending) const {
  plugin_->failCall(call, r,
                    std::string(sending ? "sending to" : "receiving from") + " rank " + std::to_string(p.rank) +
                        " in " + x.tag.describe(),
                    true);
}

void NetTransport::run(std::span<Xfer> xfers) {
  Run r;
  r.send.resize(peers_.size());
  r.recv.resize(peers_.size());
  for (auto* lanes : {&r.send, &r.recv})
    for (Run::Lane& l : *lanes)
      for (int s = kSlots - 1; s >= 0; --s) l.freeSlots.push_back(s);
  for (Xfer& x : xfers) {
    x.done = 0;
    const size_t i = static_cast<size_t>(&peer(x.peer) - peers_.data());
    (x.kind == Xfer::Kind::kSend ? r.send : r.recv)[i].q.push_back(&x);
    ++r.pending;
  }
  ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "net");
  int idle = 0;
  while (r.pending > 0) {
    bool progress = false;
    for (Peer& p : peers_) {
      progress |= progressSends(r, p);
      progress |= progressRecvs(r, p);
    }
    if (r.pending == 0) break;
    if (progress) {
      watch.madeProgress();
      idle = 0;
      continue;
    }
    const Xfer* waiting = &xfers.front();
    for (const Xfer& x : xfers)
      if (x.done < x.bytes || x.bytes == 0) waiting = &x;
    if (poisoned_.load(std::memory_order_acquire))
      throwError(hetcclRemoteError,
                 "net: this rank's communicator failed (" + poisonWhy_ + ") during " + waiting->tag.describe());
    checkAlive(r);
    watch.check(*waiting);
    if (++idle > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
}

void NetTransport::checkAlive(const Run& r) const {
  auto now = std::chrono::steady_clock::now();
  if (now - r.lastAliveCheck < std::chrono::milliseconds(100)) return;
  r.lastAliveCheck = now;
  for (size_t i = 0; i < peers_.size(); ++i) {
    const Peer& p = peers_[i];
    const bool busy = !r.send[i].q.empty() || !r.send[i].ops.empty() || !r.recv[i].q.empty() || !r.recv[i].ops.empty();
    if (busy && p.pid && !processAlive(p.pid)) {
      if (r.exitedPeer != static_cast<int>(i)) {
        r.exitedPeer = static_cast<int>(i);
        r.lastAliveCheck = now - std::chrono::milliseconds(100);  // checked again after one more pass
        return;
      }
      const Xfer* x = !r.recv[i].ops.empty()   ? r.recv[i].ops.front().x
                      : !r.recv[i].q.empty()   ? r.recv[i].q.front()
                      : !r.send[i].ops.empty() ? r.send[i].ops.front().x
                                               : r.send[i].q.front();
      throwError(hetcclRemoteError, "net: rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                                        ") died during " + x->tag.describe());
    }
  }
}

bool NetTransport::progressSends(Run& r, Peer& p) {
  Run::Lane& l = r.send[static_cast<size_t>(&p - peers_.data())];
  bool progress = false;
  // Requests in order: post the one the plugin could not take yet, test the posted.
  for (auto it = l.ops.begin(); it != l.ops.end();) {
    Op& op = *it;
    if (!op.posted) {
      int rc = plugin_->isend(p.sendComm, p.send.slot(op.slot, slotBytes_), op.wire, wireTag(op.msg, op.part),
                              p.send.mr, &op.req);
      if (rc != netabi::kSuccess) failed("isend", rc, p, *op.x, true);
      if (!op.req) break;  // later ones wait their turn
      op.posted = progress = true;
    }
    bool done = false;
    size_t n = 0;
    int rc = plugin_->test(op.req, &done, &n);
    if (rc != netabi::kSuccess) failed("test", rc, p, *op.x, true);
    if (!done) {
      ++it;
      continue;
    }
    progress = true;
    if (op.part > 0) op.x->done += op.plain;
    if (op.last) --r.pending;
    l.freeSlots.push_back(op.slot);
    it = l.ops.erase(it);
  }
  // New requests while slots are free and the last one was taken.
  while (!l.freeSlots.empty() && !l.q.empty() && (l.ops.empty() || l.ops.back().posted)) {
    Xfer* x = l.q.front();
    Op op;
    op.x = x;
    op.slot = l.freeSlots.back();
    l.freeSlots.pop_back();
    uint8_t* buf = p.send.slot(op.slot, slotBytes_);
    if (l.nextPart == 0) l.msg = p.sendSeq++;
    op.msg = l.msg;
    op.part = l.nextPart;
    const uint8_t* plain;
    MsgTag h;
    if (op.part == 0) {
      h = x->tag;
      h.bytes = x->bytes;
      plain = reinterpret_cast<const uint8_t*>(&h);
      op.plain = sizeof(MsgTag);
    } else {
      op.off = static_cast<size_t>(op.part - 1) * partBytes_;
      op.plain = std::min(partBytes_, x->bytes - op.off);
      plain = static_cast<const uint8_t*>(x->src) + op.off;
    }
    if (p.sealTo)
      p.sealTo->seal(op.msg, op.part, plain, op.plain, buf, op.part == 0 ? 1 : threads_);
    else
      memcpy(buf, plain, op.plain);
    op.wire = wireBytes(p, op.plain);
    const uint32_t parts = static_cast<uint32_t>((x->bytes + partBytes_ - 1) / partBytes_);
    if (l.nextPart == parts) {
      op.last = true;
      l.q.pop_front();
      l.nextPart = 0;
    } else {
      ++l.nextPart;
    }
    int rc = plugin_->isend(p.sendComm, buf, op.wire, wireTag(op.msg, op.part), p.send.mr, &op.req);
    if (rc != netabi::kSuccess) failed("isend", rc, p, *x, true);
    op.posted = op.req != nullptr;
    l.ops.push_back(op);
    progress = true;
  }
  return progress;
}

bool NetTransport::progressRecvs(Run& r, Peer& p) {
  Run::Lane& l = r.recv[static_cast<size_t>(&p - peers_.data())];
  bool progress = false;
  for (auto it = l.ops.begin(); it != l.ops.end();) {
    Op& op = *it;
    if (!op.posted) {
      int rc = plugin_->irecv(p.recvComm, p.recv.slot(op.slot, slotBytes_), op.wire, wireTag(op.msg, op.part),
                              p.recv.mr, &op.req);
      if (rc != netabi::kSuccess) failed("irecv", rc, p, *op.x, false);
      if (!op.req) break;
      op.posted = progress = true;
    }
    if (!completeRecv(r, p, op)) {
      ++it;
      continue;
    }
    progress = true;
    l.freeSlots.push_back(op.slot);
    it = l.ops.erase(it);
  }
  progress |= postRecv(r, p);
  return progress;
}

// Posts the next receives of the lane: a header, then (once it is checked)
// the payload parts, while slots are free.
bool NetTransport::postRecv(Run& r, Peer& p) {
  Run::Lane& l = r.recv[static_cast<size_t>(&p - peers_.data())];
  bool progress = false;
  while (!l.q.empty() && (l.ops.empty() || l.ops.back().posted)) {
    Xfer* x = l.q.front();
    const uint32_t parts = static_cast<uint32_t>((x->bytes + partBytes_ - 1) / partBytes_);
    if (l.headerChecked && l.nextPart > parts) {  // every part posted (or none to post)
      if (x->bytes == 0) --r.pending;
      l.q.pop_front();
      l.nextPart = 0;
      l.headerPosted = l.headerChecked = false;
      progress = true;
      continue;
    }
    if (l.headerPosted && !l.headerChecked) break;  // parts wait for the header
    if (l.freeSlots.empty()) break;
    Op op;
    op.x = x;
    op.slot = l.freeSlots.back();
    l.freeSlots.pop_back();
    if (!l.headerPosted) {
      l.msg = p.recvSeq++;
      l.headerPosted = true;
      l.nextPart = 1;
      op.plain = sizeof(MsgTag);
    } else {
      op.part = l.nextPart++;
      op.off = static_cast<size_t>(op.part - 1) * partBytes_;
      op.plain = std::min(partBytes_, x->bytes - op.off);
    }
    op.msg = l.msg;
    op.wire = wireBytes(p, op.plain);
    int rc = plugin_->irecv(p.recvComm, p.recv.slot(op.slot, slotBytes_), op.wire, wireTag(op.msg, op.part), p.recv.mr,
                            &op.req);
    if (rc != netabi::kSuccess) failed("irecv", rc, p, *x, false);
    op.posted = op.req != nullptr;
    l.ops.push_back(op);
    progress = true;
  }
  return progress;
}

// Whether the receive is complete and handled: its data arrived (and was
// flushed where the plugin asks), a header checked, a part delivered.
bool NetTransport::completeRecv(Run& r, Peer& p, Op& op) {
  Run::Lane& l = r.recv[static_cast<size_t>(&p - peers_.data())];
  Xfer& x = *op.x;
  if (!op.received) {
    bool done = false;
    size_t n = 0;
    int rc = plugin_->test(op.req, &done, &n);
    if (rc != netabi::kSuccess) failed("test", rc, p, x, false);
    if (!done) return false;
    if (n != op.wire)
      throwError(hetcclRemoteError, "net: rank " + std::to_string(p.rank) + " sent " + std::to_string(n) +
                                        " bytes where " + std::to_string(op.wire) + " were announced (" +
                                        (op.part ? "part " + std::to_string(op.part) : std::string("header")) + " of " +
                                        x.tag.describe() + ")");
    op.received = true;
    if (props_.forceFlush) {
      rc = plugin_->iflush(p.recvComm, p.recv.slot(op.slot, slotBytes_), op.wire, p.recv.mr, &op.flushReq);
      if (rc != netabi::kSuccess) failed("iflush", rc, p, x, false);
    }
  }
  if (op.flushReq) {
    bool done = false;
    size_t n = 0;
    int rc = plugin_->test(op.flushReq, &done, &n);
    if (rc != netabi::kSuccess) failed("test", rc, p, x, false);
    if (!done) return false;
    op.flushReq = nullptr;
  }
  if (op.part == 0) {
    MsgTag got;
    const uint8_t* slot = p.recv.slot(op.slot, slotBytes_);
    if (p.openFrom) {
      if (!p.openFrom->openInto(op.msg, 0, slot, sizeof(MsgTag), reinterpret_cast<uint8_t*>(&got), 1))
        throwError(hetcclRemoteError, "net: the header of encrypted message " + std::to_string(op.msg) + " from rank " +
                                          std::to_string(p.rank) + " (in " + x.tag.describe() + ") " +
                                          kSealedFailedAuth);
    } else {
      memcpy(&got, slot, sizeof(MsgTag));
    }
    if (!got.sameCall(x.tag) || got.bytes != x.bytes) throwMismatch("net", ctx_.rank, x, got);
    l.headerChecked = true;
    return true;
  }
  deliver(p, op);
  x.done += op.plain;
  if (x.done == x.bytes) --r.pending;
  return true;
}

void NetTransport::deliver(Peer& p, Op& op) {
  Xfer& x = *op.x;
  uint8_t* slot = p.recv.slot(op.slot, slotBytes_);
  auto* dst = static_cast<uint8_t*>(x.dst) + op.off;
  const size_t es = dataTypeSize(x.dtype);
  if (!p.openFrom) {
    if (x.kind == Xfer::Kind::kRecv)
      memcpy(dst, slot, op.plain);
    else
      reduceArrays(dst, x.operand(op.off), slot, op.plain / es, x.dtype, x.redKind);
    return;
  }
  if (!openSealedPart(*p.openFrom, x, op.msg, op.part, slot, op.plain, op.off, threads_))
    throwSealedPartFailed("net", op.part, op.msg, p.rank, x);
}

}  // namespace hetccl
