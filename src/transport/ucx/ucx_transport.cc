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
  const size_t pb = ucx::partBytes(bytes);
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

}  // namespace hetccl
