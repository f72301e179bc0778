// The ofi transport's encrypted links (see ofi_transport.h): their keys and
// what arrives on them.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/workers.h"
#include "elements/host_reduce.h"
#include "secure/message_cipher.h"
#include "transport/ofi/ofi_ops.h"
#include "transport/ofi/ofi_transport.h"

namespace hetccl {

void OfiTransport::setUpSealing(const std::vector<std::array<uint8_t, 16>>& nonces) {
  sealTo_.resize(static_cast<size_t>(ctx_.nranks));
  openFrom_.resize(static_cast<size_t>(ctx_.nranks));
  // Records per key / records per part: messages per key, so that a key seals
  // about as much as HETCCL_ENCRYPT_REKEY_RECORDS says.
  const uint64_t perKey =
      std::max<uint64_t>(1, ctx_.rekeyRecords / std::max<size_t>(1, partBytes_ / secure::kMaxRecordPlain));
  bool any = false;
  for (int peer : ctx_.peers) {
    if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) continue;
    if (static_cast<size_t>(peer) >= ctx_.encrypt.size() || !ctx_.encrypt[peer]) continue;
    // Both ends salt with the lower rank's nonce first; the lower rank sends with the client key.
    const int lo = std::min(ctx_.rank, peer), hi = std::max(ctx_.rank, peer);
    std::array<uint8_t, 32> salt;
    memcpy(salt.data(), nonces[lo].data(), 16);
    memcpy(salt.data() + 16, nonces[hi].data(), 16);
    const secure::LinkKeys k = secure::deriveLinkKeys(ctx_.bootstrap->id().secret, salt, "ofi transport");
    const bool client = ctx_.rank < peer;
    sealTo_[peer] = std::make_unique<secure::MessageCipher>(client ? k.client : k.server, true, perKey);
    openFrom_[peer] = std::make_unique<secure::MessageCipher>(client ? k.server : k.client, false, perKey);
    any = true;
  }
  if (!any) return;
  threads_ = hostThreadsFor(ctx_.localRanks);
  sendStaging_.resize(ofi::kStagingSlots * secure::MessageCipher::sealedBytes(partBytes_));
}

size_t OfiTransport::wireBytes(int peer, size_t plain) const {
  return sealed(peer) ? secure::MessageCipher::sealedBytes(plain) : plain;
}

void OfiTransport::openPart(Op& op) {
  Xfer& x = *op.x;
  const uint32_t part = static_cast<uint32_t>(op.tag & 0xFFFF);
  auto* sealedPart = static_cast<uint8_t*>(op.buf);
  bool good;
  if (x.kind == Xfer::Kind::kRecvReduce) {
    const size_t es = dataTypeSize(x.dtype);
    auto* dst = static_cast<uint8_t*>(x.dst) + op.off;
    good = openFrom_[x.peer]->openInPlace(
        op.msg, part, sealedPart, op.plain, threads_, [&](size_t off, const uint8_t* data, size_t len) {
          reduceArrays(dst + off, x.operand(op.off + off), data, len / es, x.dtype, x.redKind);
        });
  } else {
    good = openFrom_[x.peer]->openInto(op.msg, part, sealedPart, op.plain, static_cast<uint8_t*>(x.dst) + op.off,
                                       threads_);
  }
  if (!good)
    throwError(hetcclRemoteError, "ofi: part " + std::to_string(part) + " of encrypted message " +
                                      std::to_string(op.msg) + " from rank " + std::to_string(x.peer) + " (in " +
                                      x.tag.describe() + ") " + ofi::kFailedAuth);
  x.done += op.plain;
}

}  // namespace hetccl
