#pragma once
// What the message transports (ucx, ofi, net) share on encrypted links: each
// link's pair of ciphers, keyed from the job's secret and both ranks' nonces,
// and the opening of one sealed part into the receive's destination.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "secure/message_cipher.h"
#include "transport/transport.h"

namespace hetccl {

// Why a sealed header or part did not open.
constexpr const char* kSealedFailedAuth =
    "failed authentication (altered, replayed, moved or cut data, or a peer with another key)";

struct SealedLink {
  std::unique_ptr<secure::MessageCipher> sealTo;    // what this rank sends the peer
  std::unique_ptr<secure::MessageCipher> openFrom;  // what it receives from the peer
};

// Messages a key seals, for messages cut in parts of partBytes, so that a key
// seals about as many records as HETCCL_ENCRYPT_REKEY_RECORDS says.
uint64_t sealedMessagesPerKey(uint64_t rekeyRecords, size_t partBytes);

// The link between ctx.rank and peer. Both ends salt with the lower rank's
// nonce first, and the lower rank sends with the client key; `label` names
// the transport, so that its keys differ from any other's.
SealedLink makeSealedLink(const TransportContext& ctx, int peer, const std::array<uint8_t, 16>& lowerNonce,
                          const std::array<uint8_t, 16>& higherNonce, const char* label, uint64_t messagesPerKey);

// Opens part `part` of message `msg` (plain bytes at offset `off` of x) into
// x's destination, or folds it into x's operand for a receive-reduce; false
// where it failed authentication.
bool openSealedPart(secure::MessageCipher& from, const Xfer& x, uint64_t msg, uint32_t part, uint8_t* sealed,
                    size_t plain, size_t off, int threads);

// The error of a part that failed authentication.
[[noreturn]] void throwSealedPartFailed(const char* transport, uint32_t part, uint64_t msg, int peer, const Xfer& x);

}  // namespace hetccl
