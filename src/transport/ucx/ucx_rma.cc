// The ucx transport's RMA path for large plain receives: the receiver offers
// its registered buffer, the sender puts the payload into it, flushes and
// says it is done (protocol in ucx_transport.h).
#include <chrono>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "transport/ucx/ucx_ops.h"
#include "transport/ucx/ucx_transport.h"

namespace hetccl {

using ucx::OfferHead;

void UcxTransport::offerBuffer(Xfer& x, uint64_t msg, Rma& rma, std::vector<Op>& ops) {
  auto ucsCheck = [&](ucs_status_t st, const char* what) {
    if (st != UCS_OK)
      throwError(hetcclSystemError, std::string("ucx: ") + what + " for " + x.tag.describe() + " from rank " +
                                        std::to_string(x.peer) + " failed: " + api_.statusString(st));
  };
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = x.dst;
  mp.length = x.bytes;
  ucsCheck(api_.memMap(context_, &mp, &rma.memh), "ucp_mem_map");
  size_t packedLen = 0;
  ucsCheck(api_.rkeyPack(context_, rma.memh, &rma.packed, &packedLen), "ucp_rkey_pack");
  if (packedLen == 0 || sizeof(OfferHead) + packedLen > ucx::kOfferBytes)
    throwError(hetcclSystemError, "ucx: a packed rkey of " + std::to_string(packedLen) +
                                      " bytes does not fit an offer message (" + std::to_string(ucx::kOfferBytes) +
                                      " bytes)");
  OfferHead h;
  h.addr = reinterpret_cast<uint64_t>(x.dst);
  h.len = x.bytes;
  h.rkeyLen = static_cast<uint32_t>(packedLen);
  rma.wire.resize(ucx::kOfferBytes);
  memcpy(rma.wire.data(), &h, sizeof(h));
  memcpy(rma.wire.data() + sizeof(h), rma.packed, packedLen);
  postOfferOp(ops, Op::kFinRecv, x, msg, rma, 0);  // first: the finish may follow the put closely
  postOfferOp(ops, Op::kRtrSend, x, msg, rma, sizeof(h) + packedLen);
}

void UcxTransport::offerParts(Xfer& x, uint64_t msg, Rma& rma, std::vector<Op>& ops) {
  OfferHead h;
  h.len = x.bytes;
  h.mode = ucx::kOfferParts;
  rma.wire.resize(ucx::kOfferBytes);
  memcpy(rma.wire.data(), &h, sizeof(h));
  postOfferOp(ops, Op::kRtrSend, x, msg, rma, sizeof(h));
}

void UcxTransport::postOfferOp(std::vector<Op>& ops, int kind, Xfer& x, uint64_t msg, Rma& rma, size_t len) {
  Op op;
  op.kind = static_cast<Op::Kind>(kind);
  op.x = &x;
  op.msg = msg;
  op.rma = &rma;
  if (kind == Op::kFinRecv) {
    op.tag = ucx::makeTag(x.peer, msg, ucx::kFinPart);
    op.buf = &rma.fin;
    op.len = sizeof(rma.fin);
  } else {
    rma.wire.resize(ucx::kOfferBytes);
    op.tag = ucx::makeTag(kind == Op::kRtrSend ? ctx_.rank : x.peer, msg, ucx::kRtrPart);
    op.buf = rma.wire.data();
    op.len = kind == Op::kRtrSend ? len : rma.wire.size();
  }
  ops.push_back(op);
  post(ops.back());
}

void UcxTransport::acceptOffer(Op& op) {
  Rma& r = *op.rma;
  Xfer& x = *op.x;
  const std::string from = "rank " + std::to_string(x.peer);
  switch (op.kind) {
    case Op::kRtrRecv: {  // the offer: check every field before use
      OfferHead h;
      memcpy(&h, r.wire.data(), sizeof(h));
      if (h.mode == ucx::kOfferRefused)
        throwError(hetcclRemoteError,
                   "ucx: " + from + " refused " + x.tag.describe() + ": it was in another call (its error names both)");
      if (h.mode == ucx::kOfferParts && h.len == x.bytes) {
        r.partsWanted = true;  // run() adds the parts
        return;
      }
      if (h.mode != ucx::kOfferPut || h.len != x.bytes || h.rkeyLen == 0 || h.rkeyLen > ucx::kOfferBytes - sizeof(h))
        throwError(hetcclRemoteError, "ucx: malformed RMA offer from " + from + " in " + x.tag.describe() +
                                          " (length " + std::to_string(h.len) + ", rkey " + std::to_string(h.rkeyLen) +
                                          " bytes)");
      ucs_status_t st = api_.epRkeyUnpack(eps_[x.peer], r.wire.data() + sizeof(h), &r.rkey);
      if (st != UCS_OK)
        throwError(hetcclRemoteError, "ucx: the rkey " + from + " offered in " + x.tag.describe() +
                                          " does not unpack: " + api_.statusString(st));
      r.remoteAddr = h.addr;
      op.kind = Op::kPut;
      op.buf = const_cast<void*>(x.src);
      op.len = x.bytes;
      break;
    }
    case Op::kPut:  // locally complete: make it remotely complete before saying so
      op.kind = Op::kFlush;
      break;
    case Op::kFlush:
      op.kind = Op::kFinSend;
      op.buf = &r.fin;
      op.len = sizeof(r.fin);
      op.tag = ucx::makeTag(ctx_.rank, op.msg, ucx::kFinPart);
      break;
    default: throwError(hetcclInternalError, "ucx: no RMA step follows this one");
  }
  op.done = false;
  op.req = nullptr;
  post(op);
}

void UcxTransport::refuseOffer(int peer, uint64_t msg) {
  OfferHead h;
  h.mode = ucx::kOfferRefused;
  ucp_request_param_t p{};
  ucs_status_ptr_t r = api_.tagSendSyncNbx(eps_[peer], &h, sizeof(h), ucx::makeTag(ctx_.rank, msg, ucx::kRtrPart), &p);
  if (!r || UCS_PTR_IS_ERR(r)) return;
  if (!waitOrCancel(r, std::chrono::steady_clock::now() + std::chrono::seconds(5)))
    LOG_WARN(kTransport, "ucx: the refusal to rank %d did not reach it within 5 s", peer);
}

}  // namespace hetccl
