// Authenticated handshake of every hetccl connection (bootstrap root, ring,
// transports). Both sides prove knowledge of the job secret with a keyed MAC
// (SipHash-2-4) over fresh nonces, and the protocol version must match.
// Anything else is refused with a clear error before any other byte is read.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "bootstrap/socket.h"

namespace hetccl {

constexpr uint32_t kProtocolMagic = 0x4c435448;  // "HTCL"
constexpr uint32_t kProtocolVersion = 2;         // 2: rendezvous failure reports, longer refusals

using Secret = std::array<uint8_t, 32>;

uint64_t sipHash24(const uint8_t key[16], const void* data, size_t len);
// MAC of data under a 32-byte secret (both key halves folded in).
uint64_t secretMac(const Secret& secret, const void* data, size_t len);

// Which service a connection is for; a client of one service talking to
// another's port is refused.
enum class Service : uint32_t { kRoot = 1, kRing = 2, kTransport = 3 };

// What the connecting side announces about itself.
struct PeerHello {
  uint64_t jobId = 0;
  int32_t rank = -1;
  int32_t nranks = 0;
  uint32_t service = 0;
  uint32_t reserved = 0;
};

// PeerHello::reserved and the server's hello: bit 0 asks that the
// connection be sealed (bootstrap services only; the transport encrypts its
// own links). Covered by the handshake's MACs, so no one can strip it.
constexpr uint32_t kHelloSeal = 1;
// Whether this process asks for sealed bootstrap connections:
// HETCCL_ENCRYPT=all, or cross-site with a site named (HETCCL_SITE or
// HETCCL_SITE_MAP). A connection is sealed when either end asks.
bool bootstrapSealWanted();

// Both ends' fresh nonces of one handshake (server's first): with the job
// secret they key the connection's encrypted records, if it has any.
struct SessionNonces {
  std::array<uint8_t, 32> bytes{};
};

// Client: proves the secret, checks the server's proof, seals the socket
// where either end asked (bootstrap services). Throws on failure.
SessionNonces clientHandshake(const Socket& s, const Secret& secret, const PeerHello& me, const Deadline& dl,
                              const std::string& what);
// Server: returns the client's hello once it proved the secret for this job
// and service; throws hetcclRemoteError otherwise (the caller drops it).
PeerHello serverHandshake(const Socket& s, const Secret& secret, uint64_t jobId, Service service, const Deadline& dl,
                          SessionNonces* nonces = nullptr);

// Server side of a listener that expects known peers: accepts connections
// and runs each one's handshake on its own thread, bounded by 10 s and by
// `dl`, so that a silent, slow or hostile client cannot hold up the real
// peers. take(hello, socket) runs under a lock for each connection that
// proved the secret: it keeps the socket (moves it, returns true) or refuses
// it (returns false: the connection is dropped and logged). Returns once
// done() holds (checked under the same lock) or *stop is set; throws
// hetcclRemoteError with `timeoutWhat` at the deadline, or on abort.
void acceptPeers(const Socket& listener, const Secret& secret, uint64_t jobId, Service service, const Deadline& dl,
                 const std::atomic<bool>* stop,
                 const std::function<bool(const PeerHello&, Socket&, const SessionNonces&)>& take,
                 const std::function<bool()>& done, const std::string& timeoutWhat);

void randomBytes(void* out, size_t n);

}  // namespace hetccl
