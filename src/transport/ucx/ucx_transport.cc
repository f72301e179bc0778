#include "transport/ucx/ucx_transport.h"
#include "transport/ucx/ucx_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include <unistd.h>

#include "elements/host_reduce.h"
#include "bootstrap/bootstrap.h"
#include "core/settings.h"
#include "core/error.h"
#include "core/log.h"
#include "core/workers.h"
#include "secure/message_cipher.h"
#include "topology/peer.h"
#include "transport/progress.h"

namespace hetccl {
namespace {

using ucx::kPartBytes;
using ucx::kSealedHeader;
using ucx::kSlotBytes;
using ucx::kStagingSlots;

// Parts of a message: at most kMaxParts, each a multiple of 8 bytes but the last.
size_t partBytes(size_t bytes) {
  size_t p = std::max(kPartBytes, (bytes + ucx::kMaxParts - 1) / ucx::kMaxParts);
  return (p + 7) & ~size_t{7};
}

// The GPU memory this UCX could move itself (built with CUDA or ROCm), for
// the log: hetccl hands it host memory only (GPU ranks' data crosses through
// the device border or pinned staging).
std::string gpuMemoryTypes(uint64_t memTypes) {
  std::string out;
  if (memTypes & (uint64_t{1} << UCS_MEMORY_TYPE_CUDA)) out += ", cuda";
  if (memTypes & (uint64_t{1} << UCS_MEMORY_TYPE_ROCM)) out += ", rocm";
  return out;
}

void epError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* a = static_cast<UcxTransport::EpArg*>(arg);
  a->t->peerFailed(a->peer, status);
}

}  // namespace

using ucx::kFullMask;
using ucx::makeTag;

UcxTransport::UcxTransport(const TransportContext& ctx)
    : api_(ucx::loadUcxApi()),
      ctx_(ctx),
      eps_(ctx.nranks, nullptr),
      sendSeq_(ctx.nranks, 0),
      recvSeq_(ctx.nranks, 0),
      failed_(ctx.nranks, UCS_OK) {
  if (ctx.nranks > 65535) throwError(hetcclInvalidUsage, "ucx transport: at most 65535 ranks");
  auto ucsCheck = [&](ucs_status_t st, const char* what) {
    if (st != UCS_OK) throwError(hetcclSystemError, std::string("UCX: ") + what + " failed: " + api_.statusString(st));
  };
  ucp_config_t* cfg = nullptr;
  ucsCheck(api_.configRead(nullptr, nullptr, &cfg), "ucp_config_read");  // UCX_* variables apply
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
  ucs_status_t st = api_.initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &context_);
  api_.configRelease(cfg);
  ucsCheck(st, "ucp_init");
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (api_.contextQuery(context_, &attr) == UCS_OK) memTypes_ = attr.memory_types;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // run() may come from the caller or the proxy, never both
  ucsCheck(api_.workerCreate(context_, &wp, &worker_), "ucp_worker_create");

  // Worker addresses: sizes first, then the padded addresses.
  ucp_address_t* addr = nullptr;
  size_t addrLen = 0;
  ucsCheck(api_.workerGetAddress(worker_, &addr, &addrLen), "ucp_worker_get_address");
  std::vector<uint64_t> lens(ctx.nranks);
  lens[ctx.rank] = addrLen;
  ctx.bootstrap->allGather(lens.data(), sizeof(uint64_t));
  size_t maxLen = *std::max_element(lens.begin(), lens.end());
  if (maxLen > (size_t{1} << 20)) {
    api_.workerReleaseAddress(worker_, addr);
    throwError(hetcclRemoteError, "ucx transport: a worker address of " + std::to_string(maxLen) + " bytes");
  }
  std::vector<uint8_t> all(maxLen * ctx.nranks);
  memcpy(all.data() + maxLen * ctx.rank, addr, addrLen);
  api_.workerReleaseAddress(worker_, addr);
  ctx.bootstrap->allGather(all.data(), maxLen);

  epArgs_.resize(ctx.nranks);  // never resized again: endpoints hold pointers into it
  for (int r = 0; r < ctx.nranks; ++r) epArgs_[r] = {this, r};
  for (int peer : ctx.peers) {
    if (peer < 0 || peer >= ctx.nranks || peer == ctx.rank) continue;
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(all.data() + maxLen * peer);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails requests instead of hanging them
    ep.err_handler.cb = epError;
    ep.err_handler.arg = &epArgs_[peer];
    st = api_.epCreate(worker_, &ep, &eps_[peer]);
    if (st != UCS_OK) {
      // Transports without peer failure detection: then only the timeout notices a dead peer.
      LOG_INFO(kTransport, "ucx: endpoint to rank %d without peer error handling (%s)", peer, api_.statusString(st));
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ucsCheck(api_.epCreate(worker_, &ep, &eps_[peer]), "ucp_ep_create");
    }
  }
  // Peers on this host: their pids, so that a dead one is noticed even over
  // UCX transports without peer failure detection (shared memory).
  // The RMA threshold too: both sides of a message must agree on its path.
  // A fresh nonce per rank keys the encrypted links of this communicator.
  struct Who {
    uint64_t host;
    int64_t pid;
    uint64_t rmaMin;
    std::array<uint8_t, 16> nonce;
  };
  std::vector<Who> who(ctx.nranks);
  rmaMin_ = settings::kUcxRmaMin.get();
  who[ctx.rank] = {localHostHash(), static_cast<int64_t>(getpid()), rmaMin_, {}};
  randomBytes(who[ctx.rank].nonce.data(), who[ctx.rank].nonce.size());
  ctx.bootstrap->allGather(who.data(), sizeof(Who));
  for (int r = 0; r < ctx.nranks; ++r)
    if (who[r].rmaMin != rmaMin_)
      throwError(hetcclInvalidUsage, "ucx: HETCCL_UCX_RMA_MIN is " + std::to_string(who[r].rmaMin) + " on rank " +
                                         std::to_string(r) + " but " + std::to_string(rmaMin_) + " on rank " +
                                         std::to_string(ctx.rank) + "; every rank must set the same");
  localPid_.assign(ctx.nranks, 0);
  for (int r = 0; r < ctx.nranks; ++r)
    if (r != ctx.rank && who[r].host == who[ctx.rank].host) localPid_[r] = static_cast<int>(who[r].pid);
  std::vector<std::array<uint8_t, 16>> nonces(ctx.nranks);
  for (int r = 0; r < ctx.nranks; ++r) nonces[r] = who[r].nonce;
  setUpSealing(nonces);
  staging_.resize(kStagingSlots * kSlotBytes);
  ctx.bootstrap->barrier();
  size_t nSealed = 0;
  for (const auto& c : sealTo_) nSealed += c ? 1 : 0;
  LOG_INFO(kTransport,
           "ucx transport: rank %d, %zu peers (%zu encrypted, %d crypto threads), UCX %u.%u, memory types: host%s, "
           "RMA put from %s",
           ctx.rank, ctx.peers.size(), nSealed, nSealed ? threads_ : 0, api_.major, api_.minor,
           gpuMemoryTypes(memTypes_).c_str(), rmaMin_ ? (std::to_string(rmaMin_) + " bytes").c_str() : "never");
}

void UcxTransport::peerFailed(int peer, ucs_status_t status) {
  if (peer >= 0 && peer < static_cast<int>(failed_.size()) && failed_[peer] == UCS_OK) failed_[peer] = status;
}

void UcxTransport::drainRequests(std::vector<void*>& reqs) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!reqs.empty() && std::chrono::steady_clock::now() < until) {
    api_.workerProgress(worker_);
    for (size_t i = 0; i < reqs.size();) {
      if (api_.requestCheckStatus(reqs[i]) != UCS_INPROGRESS) {
        api_.requestFree(reqs[i]);
        reqs[i] = reqs.back();
        reqs.pop_back();
      } else {
        ++i;
      }
    }
  }
}

void UcxTransport::discard(int peer, uint64_t msg, uint64_t bytes) {
  if (rmaMin_ && bytes >= rmaMin_ && !sealed(peer)) return refuseOffer(peer, msg);  // the sender waits for an offer
  // The sender's synchronous sends complete only when matched: take its
  // payload (into staging, dropped) so that it is not left hanging on us.
  // An encrypted link's sender seals and posts each part as a send slot
  // frees, so the wait is per part: a live sender posts its next part within
  // milliseconds, one that found the mismatch too (from our header) posts
  // none, and then waiting longer only delays our error.
  const size_t pb = partBytes(bytes);
  const auto budget = sealed(peer) ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(5000);
  auto until = std::chrono::steady_clock::now() + budget;
  uint32_t part = 1;
  for (uint64_t off = 0; off < bytes && std::chrono::steady_clock::now() < until; off += pb, ++part) {
    size_t len = wireBytes(peer, std::min<uint64_t>(pb, bytes - off));
    if (len > staging_.size()) return;
    ucp_request_param_t p{};
    ucs_status_ptr_t r = api_.tagRecvNbx(worker_, staging_.data(), len, makeTag(peer, msg, part), kFullMask, &p);
    if (UCS_PTR_IS_ERR(r)) return;
    if (r && !waitOrCancel(r, until)) return;
    if (sealed(peer)) until = std::chrono::steady_clock::now() + budget;
  }
}

bool UcxTransport::waitOrCancel(void* req, std::chrono::steady_clock::time_point until) {
  while (api_.requestCheckStatus(req) == UCS_INPROGRESS && std::chrono::steady_clock::now() < until)
    api_.workerProgress(worker_);
  if (api_.requestCheckStatus(req) == UCS_INPROGRESS) {
    api_.requestCancel(worker_, req);
    std::vector<void*> left{req};
    drainRequests(left);
    if (!left.empty()) LOG_WARN(kTransport, "ucx: a request did not complete or cancel");
    return false;
  }
  api_.requestFree(req);
  return true;
}

void UcxTransport::closeEndpoints() {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;  // every send was matched by its receiver (synchronous sends)
  std::vector<void*> reqs;
  for (ucp_ep_h& ep : eps_) {
    if (!ep) continue;
    ucs_status_ptr_t r = api_.epCloseNbx(ep, &p);
    if (r && !UCS_PTR_IS_ERR(r)) reqs.push_back(r);
    ep = nullptr;
  }
  drainRequests(reqs);
}

UcxTransport::~UcxTransport() {
  if (worker_) {
    closeEndpoints();
    api_.workerDestroy(worker_);
  }
  if (context_) api_.cleanup(context_);
}

void UcxTransport::post(Op& op) {
  ucp_request_param_t p{};
  ucs_status_ptr_t r;
  const int peer = op.x->peer;
  if (op.kind == Op::kPut)
    r = api_.putNbx(eps_[peer], op.buf, op.len, op.rma->remoteAddr, op.rma->rkey, &p);
  else if (op.kind == Op::kFlush)
    r = api_.epFlushNbx(eps_[peer], &p);
  else if (op.sends())
    r = api_.tagSendSyncNbx(eps_[peer], op.buf, op.len, op.tag, &p);
  else
    r = api_.tagRecvNbx(worker_, op.buf, op.len, op.tag, kFullMask, &p);
  op.posted = true;
  if (UCS_PTR_IS_ERR(r)) return finish(op, UCS_PTR_STATUS(r));
  if (!r) return finish(op, UCS_OK);
  op.req = r;
}

void UcxTransport::finish(Op& op, ucs_status_t st) {
  op.done = true;
  Xfer& x = *op.x;
  if (st != UCS_OK) {
    ucs_status_t peerSt = failed_[x.peer];
    throwError(hetcclRemoteError, "ucx: " + std::string(op.sends() ? "sending to" : "receiving from") + " rank " +
                                      std::to_string(x.peer) + " in " + x.tag.describe() +
                                      " failed: " + api_.statusString(peerSt != UCS_OK ? peerSt : st) +
                                      (peerSt != UCS_OK ? " (the peer failed or exited)" : ""));
  }
  if (op.kind == Op::kRtrRecv || op.kind == Op::kPut || op.kind == Op::kFlush) return acceptOffer(op);
  if (op.kind == Op::kFinSend || op.kind == Op::kFinRecv) x.done = x.bytes;
  if (op.kind == Op::kPartSend) x.done += op.plain;
  if (op.kind == Op::kPartRecv && sealed(x.peer)) return openPart(op);
  if (op.kind == Op::kPartRecv) {
    if (x.kind == Xfer::Kind::kRecvReduce) {
      const size_t es = dataTypeSize(x.dtype);
      auto* dst = static_cast<uint8_t*>(x.dst) + op.off;
      reduceArrays(dst, x.operand(op.off), op.buf, op.len / es, x.dtype, x.redKind);
    }
    x.done += op.len;
  }
}

void UcxTransport::cancelAll(std::vector<Op>& ops) {
  std::vector<void*> live;
  for (Op& op : ops)
    if (op.req && !op.done) {
      api_.requestCancel(worker_, op.req);
      live.push_back(op.req);
      op.req = nullptr;
    }
  drainRequests(live);
  if (!live.empty()) LOG_WARN(kTransport, "ucx: %zu requests did not cancel within 2 s", live.size());
}

void UcxTransport::run(std::span<Xfer> xfers) {
  // Ops live in a vector sized up front: headers first, parts appended as
  // headers complete (reserve keeps their addresses stable).
  size_t maxOps = 0;
  for (Xfer& x : xfers) maxOps += 3 + (x.bytes + partBytes(x.bytes) - 1) / partBytes(x.bytes);
  std::vector<Op> ops;
  ops.reserve(maxOps);
  std::vector<Rma> rma(xfers.size());  // registrations and rkeys of the RMA path, released on return
  for (Rma& r : rma) r.api = &api_, r.context = context_;
  // Sent after the receiver's offer (never on an encrypted link).
  auto offered = [this](const Xfer& x) { return rmaMin_ && x.bytes >= rmaMin_ && !sealed(x.peer); };
  std::vector<MsgTag> headers(xfers.size());
  std::vector<std::array<uint8_t, kSealedHeader>> sealedHeaders(sendStaging_.empty() ? 0 : xfers.size());
  std::deque<size_t> waitSlot;  // receive-reduce and encrypted receive parts waiting for a receive slot
  std::deque<size_t> waitSend;  // encrypted send parts waiting for a send slot
  std::vector<int> freeSlots, freeSendSlots;
  for (int s = kStagingSlots - 1; s >= 0; --s) {
    freeSlots.push_back(s);
    if (!sendStaging_.empty()) freeSendSlots.push_back(s);
  }
  auto addParts = [&](Xfer& x, uint64_t msg) {
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
      ops.push_back(op);
      if (seal && x.kind == Xfer::Kind::kSend)
        waitSend.push_back(ops.size() - 1);
      else if (seal || x.kind == Xfer::Kind::kRecvReduce)
        waitSlot.push_back(ops.size() - 1);
      else
        post(ops.back());
    }
  };
  for (const Xfer& x : xfers) {  // before anything is posted: message numbers stay in step
    if (sealed(x.peer) && partBytes(x.bytes) > kPartBytes)
      throwError(hetcclInvalidUsage, "ucx: a message of " + std::to_string(x.bytes) + " bytes to/from rank " +
                                         std::to_string(x.peer) + " on an encrypted link (at most " +
                                         std::to_string(kPartBytes * ucx::kMaxParts) + ")");
  }
  try {
    for (size_t i = 0; i < xfers.size(); ++i) {
      Xfer& x = xfers[i];
      if (x.peer < 0 || x.peer >= ctx_.nranks || !eps_[x.peer])
        throwError(hetcclInternalError, "ucx: no endpoint to rank " + std::to_string(x.peer));
      x.done = 0;
      headers[i] = x.tag;
      headers[i].bytes = x.bytes;
      const bool send = x.kind == Xfer::Kind::kSend;
      const uint64_t msg = send ? sendSeq_[x.peer]++ : recvSeq_[x.peer]++;
      Op op;
      op.kind = send ? Op::kHeaderSend : Op::kHeaderRecv;
      op.x = &x;
      op.tag = makeTag(send ? ctx_.rank : x.peer, msg, 0);
      op.buf = &headers[i];
      op.len = sizeof(MsgTag);
      op.header = &headers[i];
      op.msg = msg;
      if (sealed(x.peer)) {  // the header as part 0 of the message
        op.buf = sealedHeaders[i].data();
        op.len = kSealedHeader;
        if (send)
          sealTo_[x.peer]->seal(msg, 0, reinterpret_cast<const uint8_t*>(&headers[i]), sizeof(MsgTag),
                                sealedHeaders[i].data(), 1);
        else
          op.sealedHeader = sealedHeaders[i].data();
      }
      ops.push_back(op);
      post(ops.back());
      if (send && offered(x)) {  // wait for the receiver's offer
        postOfferOp(ops, Op::kRtrRecv, x, msg, rma[i], 0);
      } else if (send) {
        addParts(x, msg);
      }
    }
    ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "ucx");
    auto lastAliveCheck = std::chrono::steady_clock::now();
    for (;;) {
      bool progress = api_.workerProgress(worker_) > 0;
      const Xfer* pending = nullptr;
      const size_t n = ops.size();  // parts added below are checked next round
      for (size_t i = 0; i < n; ++i) {
        Op& op = ops[i];
        if (!op.posted) {  // a receive-reduce part waiting for a staging slot
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
        if (op.kind == Op::kHeaderRecv && op.header) {  // completed (now or when posted): check it once
          if (op.sealedHeader && !openFrom_[op.x->peer]->openInto(op.msg, 0, op.sealedHeader, sizeof(MsgTag),
                                                                  reinterpret_cast<uint8_t*>(op.header), 1))
            throwError(hetcclRemoteError, "ucx: the header of encrypted message " + std::to_string(op.msg) +
                                              " from rank " + std::to_string(op.x->peer) + " (in " +
                                              op.x->tag.describe() + ") " + ucx::kFailedAuth);
          const MsgTag got = *op.header;
          op.header = nullptr;
          if (!got.sameCall(op.x->tag) || got.bytes != op.x->bytes) {
            discard(op.x->peer, op.msg, got.bytes);
            throwMismatch("ucx", ctx_.rank, *op.x, got);
          }
          Rma& r = rma[static_cast<size_t>(op.x - xfers.data())];
          if (offered(*op.x) && op.x->kind == Xfer::Kind::kRecv) {
            offerBuffer(*op.x, op.msg, r, ops);
          } else {
            if (offered(*op.x)) offerParts(*op.x, op.msg, r, ops);
            addParts(*op.x, op.msg);
          }
          progress = true;
        }
        if (op.kind == Op::kRtrRecv && op.done && op.rma->partsWanted && !op.rma->partsAdded) {
          op.rma->partsAdded = true;
          addParts(*op.x, op.msg);
          progress = true;
        }
        if ((op.kind == Op::kPartRecv || op.kind == Op::kPartSend) && op.slot >= 0) {
          (op.kind == Op::kPartRecv ? freeSlots : freeSendSlots).push_back(op.slot);
          op.slot = -1;
          progress = true;
        }
      }
      while (!waitSend.empty() && !freeSendSlots.empty()) {  // seal the next parts as slots free
        Op& op = ops[waitSend.front()];
        waitSend.pop_front();
        op.slot = freeSendSlots.back();
        freeSendSlots.pop_back();
        op.buf = sendStaging_.data() + static_cast<size_t>(op.slot) * kSlotBytes;
        sealTo_[op.x->peer]->seal(op.msg, static_cast<uint32_t>(op.tag & 0xFFFF),
                                  static_cast<const uint8_t*>(op.x->src) + op.off, op.plain,
                                  static_cast<uint8_t*>(op.buf), threads_);
        post(op);
        progress = true;
      }
      while (!waitSlot.empty() && !freeSlots.empty()) {
        Op& op = ops[waitSlot.front()];
        waitSlot.pop_front();
        op.slot = freeSlots.back();
        freeSlots.pop_back();
        op.buf = staging_.data() + static_cast<size_t>(op.slot) * kSlotBytes;
        post(op);
        progress = true;
      }
      // Done when every op completed and was processed (headers checked,
      // parts added, staging slots returned).
      if (waitSlot.empty() && waitSend.empty() && std::all_of(ops.begin(), ops.end(), [](const Op& o) {
            return o.done && !(o.kind == Op::kHeaderRecv && o.header) && o.slot < 0 &&
                   !(o.kind == Op::kRtrRecv && o.rma->partsWanted && !o.rma->partsAdded);
          }))
        return;
      if (progress) {
        watch.madeProgress();
        continue;
      }
      if (pending) {
        auto now = std::chrono::steady_clock::now();
        if (now - lastAliveCheck > std::chrono::milliseconds(100)) {
          lastAliveCheck = now;
          for (const Op& op : ops)
            if (!op.done && localPid_[op.x->peer] && !processAlive(localPid_[op.x->peer]))
              throwError(hetcclRemoteError, "ucx: rank " + std::to_string(op.x->peer) + " (pid " +
                                                std::to_string(localPid_[op.x->peer]) + ") died during " +
                                                op.x->tag.describe());
        }
        if (failed_[pending->peer] != UCS_OK)
          throwError(hetcclRemoteError, "ucx: rank " + std::to_string(pending->peer) + " failed during " +
                                            pending->tag.describe() + ": " + api_.statusString(failed_[pending->peer]));
        watch.check(*pending);
      }
      std::this_thread::yield();
    }
  } catch (...) {
    cancelAll(ops);
    throw;
  }
}

}  // namespace hetccl
