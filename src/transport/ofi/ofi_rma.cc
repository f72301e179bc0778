// The ofi transport's RMA path for large messages: the receiver offers its
// registered buffer, the sender writes the payload into it and says it is
// done (protocol in ofi_transport.h).
#include <sys/uio.h>

#include <algorithm>
#include <string>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "core/error.h"
#include "core/log.h"
#include "transport/ofi/ofi_ops.h"
#include "transport/ofi/ofi_transport.h"

namespace hetccl {

OfiTransport::Rma& OfiTransport::rmaOf(Run& r, const Xfer& x) {
  return r.rma[static_cast<size_t>(&x - r.xfers.data())];
}

void OfiTransport::postOfferOp(Run& r, Xfer& x, uint64_t msg, int kind) {
  Rma& m = rmaOf(r, x);
  Op op;
  op.kind = static_cast<Op::Kind>(kind);
  op.x = &x;
  op.msg = msg;
  if (kind == Op::kOfferSend || kind == Op::kOfferRecv) {
    op.tag = ofi::makeTag(msg, ofi::kOfferPart);
    op.buf = &m.offer;
    op.len = sizeof(m.offer);
  } else {
    op.tag = ofi::makeTag(msg, ofi::kFinPart);
    op.buf = &m.fin;
    op.len = sizeof(m.fin);
  }
  r.ops.push_back(op);
  if (!r.backlog.empty() || !post(r, r.ops.back())) r.backlog.push_back(r.ops.size() - 1);
}

void OfiTransport::offer(Run& r, Xfer& x, uint64_t msg) {
  Rma& m = rmaOf(r, x);
  if (x.kind != Xfer::Kind::kRecv) {  // a fold takes tagged parts through its staging slots
    m.offer = {ofi::kOfferParts, 0, x.bytes, 0};
    ++rmaParts_;
    addParts(r, x, msg);
    postOfferOp(r, x, msg, Op::kOfferSend);
    return;
  }
  const ofi::MrCache::Entry& e = remoteMrs_->find(
      x.dst, x.bytes, [this](const void* p, size_t n) { return registerMemory(p, n, FI_REMOTE_WRITE); });
  const auto dst = reinterpret_cast<uint64_t>(x.dst);
  m.offer = {ofi::kOfferWrite, mrVirtAddr_ ? dst : dst - e.begin, x.bytes, fi_mr_key(e.mr)};
  postOfferOp(r, x, msg, Op::kFinRecv);  // first: the finish follows the writes closely
  postOfferOp(r, x, msg, Op::kOfferSend);
}

void OfiTransport::acceptOffer(Run& r, Op& op) {
  Xfer& x = *op.x;
  Rma& m = rmaOf(r, x);
  const ofi::Offer o = m.offer;
  if (o.mode == ofi::kOfferParts && o.len == x.bytes) return addParts(r, x, op.msg);
  if (o.mode == ofi::kOfferRefused)
    throwError(hetcclRemoteError,
               "ofi: rank " + std::to_string(x.peer) + " refused " + x.tag.describe() +
                   ": its check of this call's header failed (another call, or another count: its error names both)");
  // Writes stay within what the receiver offered: exactly the bytes this header announced.
  if (o.mode != ofi::kOfferWrite || o.len != x.bytes)
    throwError(hetcclRemoteError, "ofi: malformed RMA offer from rank " + std::to_string(x.peer) + " in " +
                                      x.tag.describe() + " (mode " + std::to_string(o.mode) + ", length " +
                                      std::to_string(o.len) + " where the header announced " + std::to_string(x.bytes) +
                                      ")");
  const size_t pb = ofi::partBytesFor(x.bytes, partBytes_);
  uint32_t part = 1;
  for (size_t off = 0; off < x.bytes; off += pb, ++part) {
    Op w;
    w.kind = Op::kWrite;
    w.x = &x;
    w.msg = op.msg;
    w.tag = ofi::makeTag(op.msg, part);
    w.off = off;
    w.plain = w.len = std::min(pb, x.bytes - off);
    w.buf = const_cast<uint8_t*>(static_cast<const uint8_t*>(x.src) + off);
    r.ops.push_back(w);
    ++m.writesLeft;
    if (!r.backlog.empty() || !post(r, r.ops.back())) r.backlog.push_back(r.ops.size() - 1);
  }
}

void OfiTransport::refuseOffer(int peer, uint64_t msg, size_t announced) {
  if (!rmaMin_ || announced < rmaMin_ || sealed(peer)) return;  // the sender waits for no offer
  ofi::Offer o;
  o.mode = ofi::kOfferRefused;
  if (info_->tx_attr->inject_size < sizeof(o) ||
      fi_tinject(ep_, &o, sizeof(o), addr_[peer], ofi::makeTag(msg, ofi::kOfferPart)) != 0)
    LOG_INFO(kTransport, "ofi: could not tell rank %d its message %llu was refused: it fails at its timeout", peer,
             static_cast<unsigned long long>(msg));
}

bool OfiTransport::postWrite(Run& r, Op& op, void* desc) {
  const Xfer& x = *op.x;
  const ofi::Offer& o = rmaOf(r, x).offer;
  if (op.off + op.len > o.len)
    throwError(hetcclInternalError, "ofi: a write of " + std::to_string(op.len) + " bytes at " +
                                        std::to_string(op.off) + " past the " + std::to_string(o.len) + " bytes rank " +
                                        std::to_string(x.peer) + " offered");
  iovec iov{op.buf, op.len};
  fi_rma_iov target{o.addr + op.off, op.len, o.key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = addr_[x.peer];
  msg.rma_iov = &target;
  msg.rma_iov_count = 1;
  msg.context = &op;
  // Complete once the bytes are in the receiver's memory: the finish that follows may say so.
  const ssize_t rc = fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0)
    throwError(hetcclRemoteError, "ofi: an RMA write of " + std::to_string(op.len) + " bytes to rank " +
                                      std::to_string(x.peer) + " in " + x.tag.describe() +
                                      " failed: " + api_.strerror(static_cast<int>(-rc)));
  op.posted = true;
  return true;
}

void OfiTransport::wrote(Run& r, Op& op) {
  Xfer& x = *op.x;
  Rma& m = rmaOf(r, x);
  x.done += op.plain;
  if (--m.writesLeft > 0) return;
  m.fin = x.bytes;
  ++rmaWritten_;
  postOfferOp(r, x, op.msg, Op::kFinSend);
}

void OfiTransport::finished(Run& r, Op& op) {
  Xfer& x = *op.x;
  const uint64_t fin = rmaOf(r, x).fin;
  if (fin != x.bytes)
    throwError(hetcclRemoteError, "ofi: rank " + std::to_string(x.peer) + " finished an RMA write of " +
                                      std::to_string(fin) + " bytes in " + x.tag.describe() + " where " +
                                      std::to_string(x.bytes) + " were offered");
  x.done = x.bytes;
  ++rmaReceived_;
}

}  // namespace hetccl
