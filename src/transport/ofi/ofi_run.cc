// OfiTransport::run: one batch of transfers driven to completion. Every
// header is posted first (message numbers stay in step with the peers'), a
// send's parts with it, a receive's parts once its header arrived and
// matched; completions are read from the queue and each handled as it
// comes, until every operation is done. An error completion, a dead peer,
// the timeout or abort end the run: what is in flight is cancelled, and the
// transport refuses later runs.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <poll.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core/clock.h"
#include "core/error.h"
#include "elements/host_reduce.h"
#include "secure/message_cipher.h"
#include "transport/ofi/ofi_ops.h"
#include "transport/ofi/ofi_transport.h"
#include "transport/progress.h"

namespace hetccl {

using ofi::makeTag;

void OfiTransport::run(std::span<Xfer> xfers) {
  if (!failed_.empty())
    throwError(hetcclRemoteError,
               "ofi: an earlier call failed on this communicator (" + failed_ + "); its links are in an unknown state");
  size_t maxOps = 0;
  for (const Xfer& x : xfers) {  // before anything is posted: message numbers stay in step
    if (x.peer < 0 || x.peer >= ctx_.nranks || x.peer == ctx_.rank || addr_[x.peer] == FI_ADDR_UNSPEC)
      throwError(hetcclInternalError, "ofi: no endpoint address of rank " + std::to_string(x.peer));
    const size_t pb = ofi::partBytesFor(x.bytes, partBytes_);
    if ((sealed(x.peer) || x.kind == Xfer::Kind::kRecvReduce) && pb > partBytes_)
      throwError(hetcclInvalidUsage, "ofi: a message of " + std::to_string(x.bytes) + " bytes to/from rank " +
                                         std::to_string(x.peer) + " is too large for an encrypted link or a fold (" +
                                         std::to_string(partBytes_ * ofi::kMaxParts) + " at most)");
    maxOps += 1 + (x.bytes + pb - 1) / pb + (offered(x) ? 2 : 0);  // the RMA path: offer and finish
  }
  Run r(xfers);
  r.ops.reserve(maxOps);
  if (!sendStaging_.empty()) r.sealedHeaders.resize(xfers.size());
  for (int s = ofi::kStagingSlots - 1; s >= 0; --s) {
    r.freeSlots.push_back(s);
    if (!sendStaging_.empty()) r.freeSendSlots.push_back(s);
  }
  try {
    postHeaders(r);
    ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "ofi");
    auto lastAliveCheck = std::chrono::steady_clock::now();
    double lastProgressUs = clockUs();
    for (;;) {
      bool progress = false;
      readCompletions(r, &progress);
      const size_t waiting = r.backlog.size() + r.waitSlot.size() + r.waitSend.size();
      postBacklog(r);
      fillSlots(r);
      if (r.backlog.size() + r.waitSlot.size() + r.waitSend.size() != waiting) progress = true;
      if (r.doneOps == r.ops.size()) {
        if (remoteMrs_) remoteMrs_->runEnded();
        return;
      }
      if (progress) {
        watch.madeProgress();
        lastProgressUs = clockUs();
        continue;
      }
      const auto pending = std::find_if(r.ops.begin(), r.ops.end(), [](const Op& o) { return !o.done; });
      checkPeers(r, *pending->x, &lastAliveCheck, watch);
      idle(r, clockUs() - lastProgressUs);
    }
  } catch (const std::exception& e) {
    failed_ = e.what();
    cancelAll(r);
    if (remoteMrs_) remoteMrs_->clear();  // a peer's late write fails instead of landing in a returned buffer
    throw;
  }
}

void OfiTransport::postHeaders(Run& r) {
  for (size_t i = 0; i < r.xfers.size(); ++i) {
    Xfer& x = r.xfers[i];
    x.done = 0;
    r.headers[i] = x.tag;
    r.headers[i].bytes = x.bytes;
    const bool send = x.kind == Xfer::Kind::kSend;
    const uint64_t msg = send ? sendSeq_[x.peer]++ : recvSeq_[x.peer]++;
    Op op;
    op.kind = send ? Op::kHeaderSend : Op::kHeaderRecv;
    op.x = &x;
    op.tag = makeTag(msg, 0);
    op.buf = &r.headers[i];
    op.len = sizeof(MsgTag);
    op.header = &r.headers[i];
    op.msg = msg;
    if (sealed(x.peer)) {  // the header as part 0 of the message
      op.buf = r.sealedHeaders[i].data();
      op.len = ofi::kSealedHeader;
      if (send)
        sealTo_[x.peer]->seal(msg, 0, reinterpret_cast<const uint8_t*>(&r.headers[i]), sizeof(MsgTag),
                              r.sealedHeaders[i].data(), 1);
      else
        op.sealedHeader = r.sealedHeaders[i].data();
    }
    r.ops.push_back(op);
    if (!r.backlog.empty() || !post(r, r.ops.back())) r.backlog.push_back(r.ops.size() - 1);
    if (send && offered(x))
      postOfferOp(r, x, msg, Op::kOfferRecv);  // the receiver's offer says where the payload goes
    else if (send)
      addParts(r, x, msg);
  }
}

void OfiTransport::addParts(Run& r, Xfer& x, uint64_t msg) {
  const size_t pb = ofi::partBytesFor(x.bytes, partBytes_);
  const bool seal = sealed(x.peer);
  const bool send = x.kind == Xfer::Kind::kSend;
  uint32_t part = 1;
  for (size_t off = 0; off < x.bytes; off += pb, ++part) {
    Op op;
    op.kind = send ? Op::kPartSend : Op::kPartRecv;
    op.x = &x;
    op.tag = makeTag(msg, part);
    op.off = off;
    op.plain = std::min(pb, x.bytes - off);
    op.len = wireBytes(x.peer, op.plain);
    op.msg = msg;
    if (send)
      op.buf = const_cast<uint8_t*>(static_cast<const uint8_t*>(x.src) + off);
    else if (x.kind == Xfer::Kind::kRecv)
      op.buf = static_cast<uint8_t*>(x.dst) + off;
    r.ops.push_back(op);
    if (seal && send)
      r.waitSend.push_back(r.ops.size() - 1);
    else if (seal || x.kind == Xfer::Kind::kRecvReduce)
      r.waitSlot.push_back(r.ops.size() - 1);
    else if (!r.backlog.empty() || !post(r, r.ops.back()))
      r.backlog.push_back(r.ops.size() - 1);  // behind what already waits for room
  }
}

bool OfiTransport::post(Run& r, Op& op) {
  const int peer = op.x->peer;
  void* desc = nullptr;
  if (mrLocal_) {  // once per run: every header, or the whole transfer's buffer; staging from init
    const Xfer& x = *op.x;
    if (op.slot >= 0)
      desc = descFor(r, op.buf, op.len);
    else if (op.sealedHeader || ((op.kind == Op::kHeaderSend) && sealed(x.peer)))
      desc = descFor(r, r.sealedHeaders.data(), r.sealedHeaders.size() * sizeof(r.sealedHeaders[0]));
    else if (op.kind == Op::kHeaderSend || op.kind == Op::kHeaderRecv)
      desc = descFor(r, r.headers.data(), r.headers.size() * sizeof(MsgTag));
    else if (op.kind == Op::kOfferSend || op.kind == Op::kOfferRecv || op.kind == Op::kFinSend ||
             op.kind == Op::kFinRecv)
      desc = descFor(r, r.rma.data(), r.rma.size() * sizeof(Rma));
    else
      desc = descFor(r, op.sends() ? x.src : x.dst, x.bytes);
  }
  if (op.kind == Op::kWrite) return postWrite(r, op, desc);
  const ssize_t rc = op.sends() ? fi_tsend(ep_, op.buf, op.len, desc, addr_[peer], op.tag, &op)
                                : fi_trecv(ep_, op.buf, op.len, desc, addr_[peer], op.tag, 0, &op);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0)
    throwError(hetcclRemoteError, std::string("ofi: posting a ") + (op.sends() ? "send to" : "receive from") +
                                      " rank " + std::to_string(peer) + " in " + op.x->tag.describe() +
                                      " failed: " + api_.strerror(static_cast<int>(-rc)));
  op.posted = true;
  return true;
}

void OfiTransport::postBacklog(Run& r) {
  while (!r.backlog.empty() && post(r, r.ops[r.backlog.front()])) r.backlog.pop_front();
}

void OfiTransport::fillSlots(Run& r) {
  const size_t slotBytes = secure::MessageCipher::sealedBytes(partBytes_);
  while (r.backlog.empty() && !r.waitSend.empty() && !r.freeSendSlots.empty()) {  // seal parts as slots free
    Op& op = r.ops[r.waitSend.front()];
    op.slot = r.freeSendSlots.back();
    op.buf = sendStaging_.data() + static_cast<size_t>(op.slot) * slotBytes;
    sealTo_[op.x->peer]->seal(op.msg, static_cast<uint32_t>(op.tag & 0xFFFF),
                              static_cast<const uint8_t*>(op.x->src) + op.off, op.plain, static_cast<uint8_t*>(op.buf),
                              threads_);
    r.freeSendSlots.pop_back();
    r.waitSend.pop_front();
    if (!post(r, op)) r.backlog.push_back(static_cast<size_t>(&op - r.ops.data()));
  }
  while (r.backlog.empty() && !r.waitSlot.empty() && !r.freeSlots.empty()) {
    Op& op = r.ops[r.waitSlot.front()];
    op.slot = r.freeSlots.back();
    op.buf = staging_.data() + static_cast<size_t>(op.slot) * slotBytes;
    r.freeSlots.pop_back();
    r.waitSlot.pop_front();
    if (!post(r, op)) r.backlog.push_back(static_cast<size_t>(&op - r.ops.data()));
  }
}

void OfiTransport::readCompletions(Run& r, bool* progress) {
  fi_cq_tagged_entry done[16];
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, done, 16);
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) failCompletion(r);
    if (n < 0)
      throwError(hetcclRemoteError,
                 std::string("ofi: reading the completion queue failed: ") + api_.strerror(static_cast<int>(-n)));
    for (ssize_t i = 0; i < n; ++i) completed(r, *static_cast<Op*>(done[i].op_context));
    *progress = true;
    if (n < 16) return;
  }
}

void OfiTransport::failCompletion(Run& r) {
  fi_cq_err_entry err{};
  if (fi_cq_readerr(cq_, &err, 0) < 0) throwError(hetcclRemoteError, "ofi: an error completion could not be read");
  char detail[256] = {0};
  const char* provText = fi_cq_strerror(cq_, err.prov_errno, err.err_data, detail, sizeof(detail));
  const Op* op = static_cast<const Op*>(err.op_context);
  if (!op || op < r.ops.data() || op >= r.ops.data() + r.ops.size())
    throwError(hetcclRemoteError, std::string("ofi: an operation failed: ") + api_.strerror(err.err) + " (" +
                                      (provText ? provText : "") + ")");
  const Xfer& x = *op->x;
  std::string what = api_.strerror(err.err);
  if (err.err == FI_ETRUNC)
    what = "rank " + std::to_string(x.peer) + " sent more than the " + std::to_string(op->len) +
           " bytes this rank expected (the message was refused)";
  const char* verb = op->kind == Op::kWrite ? "an RMA write to" : op->sends() ? "sending to" : "receiving from";
  throwError(hetcclRemoteError, "ofi: " + std::string(verb) + " rank " + std::to_string(x.peer) + " in " +
                                    x.tag.describe() + " failed: " + what + " (" + (provText ? provText : "") +
                                    "; the peer failed, exited or is unreachable)");
}

void OfiTransport::completed(Run& r, Op& op) {
  op.done = true;
  ++r.doneOps;
  Xfer& x = *op.x;
  switch (op.kind) {
    case Op::kHeaderSend: return;
    case Op::kHeaderRecv: return checkHeader(r, op);
    case Op::kPartSend:
      x.done += op.plain;
      if (op.slot >= 0) r.freeSendSlots.push_back(op.slot);
      op.slot = -1;
      return;
    case Op::kPartRecv:
      if (sealed(x.peer)) {
        openPart(op);
      } else {
        if (x.kind == Xfer::Kind::kRecvReduce) {
          const size_t es = dataTypeSize(x.dtype);
          reduceArrays(static_cast<uint8_t*>(x.dst) + op.off, x.operand(op.off), op.buf, op.plain / es, x.dtype,
                       x.redKind);
        }
        x.done += op.plain;
      }
      if (op.slot >= 0) r.freeSlots.push_back(op.slot);
      op.slot = -1;
      return;
    case Op::kOfferSend:
    case Op::kFinSend: return;
    case Op::kOfferRecv: return acceptOffer(r, op);
    case Op::kWrite: return wrote(r, op);
    case Op::kFinRecv: return finished(r, op);
  }
}

void OfiTransport::checkHeader(Run& r, Op& op) {
  Xfer& x = *op.x;
  if (op.sealedHeader && !openFrom_[x.peer]->openInto(op.msg, 0, op.sealedHeader, sizeof(MsgTag),
                                                      reinterpret_cast<uint8_t*>(op.header), 1))
    throwError(hetcclRemoteError, "ofi: the header of encrypted message " + std::to_string(op.msg) + " from rank " +
                                      std::to_string(x.peer) + " (in " + x.tag.describe() + ") " + ofi::kFailedAuth);
  const MsgTag got = *op.header;
  // The sender's parts stay unmatched: it fails in turn at its own header
  // check, its timeout or when this rank's endpoint closes.
  if (!got.sameCall(x.tag) || got.bytes != x.bytes) {
    refuseOffer(x.peer, op.msg, got.bytes);
    throwMismatch("ofi", ctx_.rank, x, got);
  }
  if (offered(x)) return offer(r, x, op.msg);
  addParts(r, x, op.msg);
}

void OfiTransport::idle(const Run& r, double sinceProgressUs) {
  if (waitFd_ < 0 || sinceProgressUs < spinUs_ || !r.backlog.empty()) {
    std::this_thread::yield();
    return;
  }
  fid* queue = &cq_->fid;
  if (fi_trywait(fabric_, &queue, 1) != FI_SUCCESS) return;  // completions are there: read them
  pollfd p{waitFd_, POLLIN, 0};
  ::poll(&p, 1, 100);  // bounded: the peers and the timeout are checked at least every 100 ms
}

void OfiTransport::checkPeers(Run& r, const Xfer& pending, std::chrono::steady_clock::time_point* lastAliveCheck,
                              ProgressWatch& watch) {
  auto now = std::chrono::steady_clock::now();
  if (now - *lastAliveCheck > std::chrono::milliseconds(100)) {
    *lastAliveCheck = now;
    if (const Op* gone = awaitsExitedPeer(r)) {
      // What the peer sent before it exited is in the queue: read it first.
      bool progress = false;
      readCompletions(r, &progress);
      if (!progress && (gone = awaitsExitedPeer(r))) {
        const int peer = gone->x->peer;
        throwError(hetcclRemoteError, "ofi: rank " + std::to_string(peer) + " (pid " + std::to_string(localPid_[peer]) +
                                          ") died during " + gone->x->tag.describe());
      }
      if (progress) watch.madeProgress();
    }
  }
  watch.check(pending);
}

// Only the peers this run still waits on count: a peer whose part of the run
// is done may finish its own calls and exit before this rank's run ends
// (its last send completes at the sender once the provider took it).
const OfiTransport::Op* OfiTransport::awaitsExitedPeer(const Run& r) const {
  std::vector<uint8_t> checked(localPid_.size(), 0);
  for (const Op& op : r.ops) {
    const int peer = op.x->peer;
    if (op.done || !localPid_[peer] || checked[peer]) continue;
    checked[peer] = 1;
    if (!processAlive(localPid_[peer])) return &op;
  }
  return nullptr;
}

void OfiTransport::cancelAll(Run& r) {
  size_t live = 0;
  for (Op& op : r.ops)
    if (op.posted && !op.done) {
      fi_cancel(&ep_->fid, &op);
      if (!op.sends()) ++live;
    }
  // Reap the receives' cancellations, at most 2 s: the provider must not
  // write into buffers the caller gets back. Sends only read, and one to a
  // dead peer may never complete: it is not waited for.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (live > 0 && std::chrono::steady_clock::now() < until) {
    fi_cq_tagged_entry done[16];
    const ssize_t n = fi_cq_read(cq_, done, 16);
    auto reaped = [&](void* context) {
      const Op* op = static_cast<const Op*>(context);
      if (op >= r.ops.data() && op < r.ops.data() + r.ops.size() && !op->sends() && live > 0) --live;
    };
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) reaped(done[i].op_context);
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) > 0) reaped(err.op_context);
    } else if (n != -FI_EAGAIN) {
      break;
    }
  }
}

}  // namespace hetccl
