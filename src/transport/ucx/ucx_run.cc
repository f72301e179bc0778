// UcxTransport::run: one batch of transfers driven to completion. Every
// header goes first (message numbers stay in step with the peers'), then
// the payload parts as the headers (or the receivers' offers) allow, each
// op handled as it completes, until every op is done; a peer that died or
// failed, the timeout or abort end the run, and what is in flight is
// cancelled.
#include <algorithm>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "secure/message_cipher.h"
#include "topology/peer.h"
#include "transport/progress.h"
#include "transport/ucx/ucx_ops.h"
#include "transport/ucx/ucx_transport.h"

namespace hetccl {

using ucx::kPartBytes;
using ucx::kSealedHeader;
using ucx::kSlotBytes;
using ucx::kStagingSlots;
using ucx::makeTag;
using ucx::partBytes;

void UcxTransport::run(std::span<Xfer> xfers) {
  for (const Xfer& x : xfers) {  // before anything is posted: message numbers stay in step
    if (sealed(x.peer) && partBytes(x.bytes) > kPartBytes)
      throwError(hetcclInvalidUsage, "ucx: a message of " + std::to_string(x.bytes) + " bytes to/from rank " +
                                         std::to_string(x.peer) + " on an encrypted link (at most " +
                                         std::to_string(kPartBytes * ucx::kMaxParts) + ")");
  }
  Run r(xfers);
  size_t maxOps = 0;
  for (Xfer& x : xfers) maxOps += 3 + (x.bytes + partBytes(x.bytes) - 1) / partBytes(x.bytes);
  r.ops.reserve(maxOps);
  for (Rma& m : r.rma) m.api = &api_, m.context = context_;
  if (!sendStaging_.empty()) r.sealedHeaders.resize(xfers.size());
  for (int s = kStagingSlots - 1; s >= 0; --s) {
    r.freeSlots.push_back(s);
    if (!sendStaging_.empty()) r.freeSendSlots.push_back(s);
  }
  try {
    postHeaders(r);
    progressUntilDone(r);
  } catch (...) {
    cancelAll(r.ops);
    throw;
  }
}

void UcxTransport::postHeaders(Run& r) {
  for (size_t i = 0; i < r.xfers.size(); ++i) {
    Xfer& x = r.xfers[i];
    if (x.peer < 0 || x.peer >= ctx_.nranks || !eps_[x.peer])
      throwError(hetcclInternalError, "ucx: no endpoint to rank " + std::to_string(x.peer));
    x.done = 0;
    r.headers[i] = x.tag;
    r.headers[i].bytes = x.bytes;
    const bool send = x.kind == Xfer::Kind::kSend;
    const uint64_t msg = send ? sendSeq_[x.peer]++ : recvSeq_[x.peer]++;
    Op op;
    op.kind = send ? Op::kHeaderSend : Op::kHeaderRecv;
    op.x = &x;
    op.tag = makeTag(send ? ctx_.rank : x.peer, msg, 0);
    op.buf = &r.headers[i];
    op.len = sizeof(MsgTag);
    op.header = &r.headers[i];
    op.msg = msg;
    if (sealed(x.peer)) {  // the header as part 0 of the message
      op.buf = r.sealedHeaders[i].data();
      op.len = kSealedHeader;
      if (send)
        sealTo_[x.peer]->seal(msg, 0, reinterpret_cast<const uint8_t*>(&r.headers[i]), sizeof(MsgTag),
                              r.sealedHeaders[i].data(), 1);
      else
        op.sealedHeader = r.sealedHeaders[i].data();
    }
    r.ops.push_back(op);
    post(r.ops.back());
    if (send && offered(x)) {  // wait for the receiver's offer
      postOfferOp(r.ops, Op::kRtrRecv, x, msg, r.rma[i], 0);
    } else if (send) {
      addParts(r, x, msg);
    }
  }
}

void UcxTransport::addParts(Run& r, Xfer& x, uint64_t msg) {
  const size_t pb = partBytes(x.bytes);
  const bool seal = sealed(x.peer);
  uint32_t part = 1;
  for (size_t off = 0; off < x.bytes; off += pb, ++part) {
    Op op;
    op.kind = x.kind == Xfer::Kind::kSend ? Op::kPartSend : Op::kPartRecv;
    op.x = &x;
    op.tag = makeTag(x.kind == Xfer::Kind::kSend ? ctx_.rank : x.peer, msg, part);
    op.off = off;
    op.plain = std::min(pb, x.bytes - off);
    op.len = wireBytes(x.peer, op.plain);
    op.msg = msg;
    if (x.kind == Xfer::Kind::kSend) {
      op.buf = const_cast<uint8_t*>(static_cast<const uint8_t*>(x.src) + off);
    } else if (x.kind == Xfer::Kind::kRecv) {
      op.buf = static_cast<uint8_t*>(x.dst) + off;
    }
    r.ops.push_back(op);
    if (seal && x.kind == Xfer::Kind::kSend)
      r.waitSend.push_back(r.ops.size() - 1);
    else if (seal || x.kind == Xfer::Kind::kRecvReduce)
      r.waitSlot.push_back(r.ops.size() - 1);
    else
      post(r.ops.back());
  }
}

bool UcxTransport::afterCompletion(Run& r, Op& op) {
  bool progress = false;
  if (op.kind == Op::kHeaderRecv && op.header) {  // completed (now or when posted): check it once
    if (op.sealedHeader && !openFrom_[op.x->peer]->openInto(op.msg, 0, op.sealedHeader, sizeof(MsgTag),
                                                            reinterpret_cast<uint8_t*>(op.header), 1))
      throwError(hetcclRemoteError, "ucx: the header of encrypted message " + std::to_string(op.msg) + " from rank " +
                                        std::to_string(op.x->peer) + " (in " + op.x->tag.describe() + ") " +
                                        ucx::kFailedAuth);
    const MsgTag got = *op.header;
    op.header = nullptr;
    if (!got.sameCall(op.x->tag) || got.bytes != op.x->bytes) {
      discard(op.x->peer, op.msg, got.bytes);
      throwMismatch("ucx", ctx_.rank, *op.x, got);
    }
    Rma& m = r.rma[static_cast<size_t>(op.x - r.xfers.data())];
    if (offered(*op.x) && op.x->kind == Xfer::Kind::kRecv) {
      offerBuffer(*op.x, op.msg, m, r.ops);
    } else {
      if (offered(*op.x)) offerParts(*op.x, op.msg, m, r.ops);
      addParts(r, *op.x, op.msg);
    }
    progress = true;
  }
  if (op.kind == Op::kRtrRecv && op.done && op.rma->partsWanted && !op.rma->partsAdded) {
    op.rma->partsAdded = true;
    addParts(r, *op.x, op.msg);
    progress = true;
  }
  if ((op.kind == Op::kPartRecv || op.kind == Op::kPartSend) && op.slot >= 0) {
    (op.kind == Op::kPartRecv ? r.freeSlots : r.freeSendSlots).push_back(op.slot);
    op.slot = -1;
    progress = true;
  }
  return progress;
}

bool UcxTransport::fillSlots(Run& r) {
  bool progress = false;
  while (!r.waitSend.empty() && !r.freeSendSlots.empty()) {  // seal the next parts as slots free
    Op& op = r.ops[r.waitSend.front()];
    r.waitSend.pop_front();
    op.slot = r.freeSendSlots.back();
    r.freeSendSlots.pop_back();
    op.buf = sendStaging_.data() + static_cast<size_t>(op.slot) * kSlotBytes;
    sealTo_[op.x->peer]->seal(op.msg, static_cast<uint32_t>(op.tag & 0xFFFF),
                              static_cast<const uint8_t*>(op.x->src) + op.off, op.plain, static_cast<uint8_t*>(op.buf),
                              threads_);
    post(op);
    progress = true;
  }
  while (!r.waitSlot.empty() && !r.freeSlots.empty()) {
    Op& op = r.ops[r.waitSlot.front()];
    r.waitSlot.pop_front();
    op.slot = r.freeSlots.back();
    r.freeSlots.pop_back();
    op.buf = staging_.data() + static_cast<size_t>(op.slot) * kSlotBytes;
    post(op);
    progress = true;
  }
  return progress;
}

// Every op completed and was handled (headers checked, parts added, staging
// slots returned).
bool UcxTransport::allDone(const Run& r) const {
  return r.waitSlot.empty() && r.waitSend.empty() && std::all_of(r.ops.begin(), r.ops.end(), [](const Op& o) {
           return o.done && !(o.kind == Op::kHeaderRecv && o.header) && o.slot < 0 &&
                  !(o.kind == Op::kRtrRecv && o.rma->partsWanted && !o.rma->partsAdded);
         });
}

void UcxTransport::checkPeers(const Run& r, const Xfer& pending, std::chrono::steady_clock::time_point* lastAliveCheck,
                              ProgressWatch& watch) {
  auto now = std::chrono::steady_clock::now();
  if (now - *lastAliveCheck > std::chrono::milliseconds(100)) {
    *lastAliveCheck = now;
    for (const Op& op : r.ops)
      if (!op.done && localPid_[op.x->peer] && !processAlive(localPid_[op.x->peer])) {
        // What the peer sent before it exited may still be in the worker:
        // the next round reads it, and checks again.
        if (api_.workerProgress(worker_) > 0) {
          *lastAliveCheck = now - std::chrono::milliseconds(100);
          return;
        }
        throwError(hetcclRemoteError, "ucx: rank " + std::to_string(op.x->peer) + " (pid " +
                                          std::to_string(localPid_[op.x->peer]) + ") died during " +
                                          op.x->tag.describe());
      }
  }
  if (failed_[pending.peer] != UCS_OK)
    throwError(hetcclRemoteError, "ucx: rank " + std::to_string(pending.peer) + " failed during " +
                                      pending.tag.describe() + ": " + api_.statusString(failed_[pending.peer]));
  watch.check(pending);
}

void UcxTransport::progressUntilDone(Run& r) {
  ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "ucx");
  auto lastAliveCheck = std::chrono::steady_clock::now();
  for (;;) {
    bool progress = api_.workerProgress(worker_) > 0;
    const Xfer* pending = nullptr;
    const size_t n = r.ops.size();  // parts added below are checked next round
    for (size_t i = 0; i < n; ++i) {
      Op& op = r.ops[i];
      if (!op.posted) {  // a part waiting for a staging slot
        if (!pending) pending = op.x;
        continue;
      }
      if (op.req) {
        ucs_status_t st = api_.requestCheckStatus(op.req);
        if (st == UCS_INPROGRESS) {
          if (!pending) pending = op.x;
          continue;
        }
        api_.requestFree(op.req);
        op.req = nullptr;
        progress = true;
        finish(op, st);
      }
      if (afterCompletion(r, op)) progress = true;
    }
    if (fillSlots(r)) progress = true;
    if (allDone(r)) return;
    if (progress) {
      watch.madeProgress();
      continue;
    }
    if (pending) checkPeers(r, *pending, &lastAliveCheck, watch);
    std::this_thread::yield();
  }
}

}  // namespace hetccl
