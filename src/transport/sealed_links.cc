#include "transport/sealed_links.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "elements/host_reduce.h"

namespace hetccl {

uint64_t sealedMessagesPerKey(uint64_t rekeyRecords, size_t partBytes) {
  const size_t recordsPerPart =
      std::max<size_t>(1, (partBytes + secure::kMaxRecordPlain - 1) / secure::kMaxRecordPlain);
  return std::max<uint64_t>(1, rekeyRecords / recordsPerPart);
}

SealedLink makeSealedLink(const TransportContext& ctx, int peer, const std::array<uint8_t, 16>& lowerNonce,
                          const std::array<uint8_t, 16>& higherNonce, const char* label, uint64_t messagesPerKey) {
  std::array<uint8_t, 32> salt;
  memcpy(salt.data(), lowerNonce.data(), 16);
  memcpy(salt.data() + 16, higherNonce.data(), 16);
  const secure::LinkKeys k = secure::deriveLinkKeys(ctx.bootstrap->id().secret, salt, label);
  const bool client = ctx.rank < peer;
  SealedLink l;
  l.sealTo = std::make_unique<secure::MessageCipher>(client ? k.client : k.server, true, messagesPerKey);
  l.openFrom = std::make_unique<secure::MessageCipher>(client ? k.server : k.client, false, messagesPerKey);
  return l;
}

bool openSealedPart(secure::MessageCipher& from, const Xfer& x, uint64_t msg, uint32_t part, uint8_t* sealed,
                    size_t plain, size_t off, int threads) {
  auto* dst = static_cast<uint8_t*>(x.dst) + off;
  if (x.kind != Xfer::Kind::kRecvReduce) return from.openInto(msg, part, sealed, plain, dst, threads);
  const size_t es = dataTypeSize(x.dtype);
  return from.openInPlace(msg, part, sealed, plain, threads, [&](size_t at, const uint8_t* data, size_t len) {
    reduceArrays(dst + at, x.operand(off + at), data, len / es, x.dtype, x.redKind);
  });
}

void throwSealedPartFailed(const char* transport, uint32_t part, uint64_t msg, int peer, const Xfer& x) {
  throwError(hetcclRemoteError, std::string(transport) + ": part " + std::to_string(part) + " of encrypted message " +
                                    std::to_string(msg) + " from rank " + std::to_string(peer) + " (in " +
                                    x.tag.describe() + ") " + kSealedFailedAuth);
}

}  // namespace hetccl
