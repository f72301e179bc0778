// The ofi transport's encrypted links (see ofi_transport.h): their keys and
// what arrives on them.
#include <algorithm>
#include <utility>

#include "core/workers.h"
#include "secure/message_cipher.h"
#include "transport/ofi/ofi_ops.h"
#include "transport/ofi/ofi_transport.h"
#include "transport/sealed_links.h"

namespace hetccl {

void OfiTransport::setUpSealing(const std::vector<std::array<uint8_t, 16>>& nonces) {
  sealTo_.resize(static_cast<size_t>(ctx_.nranks));
  openFrom_.resize(static_cast<size_t>(ctx_.nranks));
  const uint64_t perKey = sealedMessagesPerKey(ctx_.rekeyRecords, partBytes_);
  bool any = false;
  for (int peer : ctx_.peers) {
    if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) continue;
    if (static_cast<size_t>(peer) >= ctx_.encrypt.size() || !ctx_.encrypt[peer]) continue;
    const int lo = std::min(ctx_.rank, peer), hi = std::max(ctx_.rank, peer);
    SealedLink l = makeSealedLink(ctx_, peer, nonces[lo], nonces[hi], "ofi transport", perKey);
    sealTo_[peer] = std::move(l.sealTo);
    openFrom_[peer] = std::move(l.openFrom);
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
  if (!openSealedPart(*openFrom_[x.peer], x, op.msg, part, static_cast<uint8_t*>(op.buf), op.plain, op.off, threads_))
    throwSealedPartFailed("ofi", part, op.msg, x.peer, x);
  x.done += op.plain;
}

}  // namespace hetccl
