// The handshake's wire messages as auth.cc sends them, written out again so
// the fuzz harnesses can play a peer that follows the protocol exactly, or
// breaks it in one chosen place. If auth.cc changes its layout, the
// handshake targets fail at once (their valid seeds stop being accepted).
#pragma once

#include <cstdint>
#include <cstring>

#include "bootstrap/auth.h"

namespace fuzz {

struct ServerHello {
  uint32_t magic, version, service, reserved;
  uint8_t nonce[16];
};
struct ClientProof {
  uint32_t magic, version;
  hetccl::PeerHello hello;
  uint8_t nonce[16];
  uint64_t mac;
};
struct ServerProof {
  uint64_t mac;
};
static_assert(sizeof(ServerHello) == 32 && sizeof(ClientProof) == 56 && sizeof(ServerProof) == 8, "handshake layout");

// proof() of auth.cc: the MAC over the role, the server hello's flags, both
// nonces and the client's hello.
inline uint64_t proofMac(const hetccl::Secret& s, char role, const uint8_t* nonceServer, const uint8_t* nonceClient,
                         const hetccl::PeerHello& h, uint32_t serverFlags = 0) {
  struct {
    char role;
    uint8_t serverFlags;
    uint8_t pad[6];
    uint8_t nonceServer[16];
    uint8_t nonceClient[16];
    hetccl::PeerHello hello;
  } in{};
  static_assert(sizeof(in) == 64, "MAC input layout");
  in.role = role;
  in.serverFlags = static_cast<uint8_t>(serverFlags & 0xff);
  memcpy(in.nonceServer, nonceServer, 16);
  memcpy(in.nonceClient, nonceClient, 16);
  in.hello = h;
  return hetccl::secretMac(s, &in, sizeof(in));
}

inline bool sameHello(const hetccl::PeerHello& a, const hetccl::PeerHello& b) {
  return a.jobId == b.jobId && a.rank == b.rank && a.nranks == b.nranks && a.service == b.service &&
         a.reserved == b.reserved;
}

// The secret every harness uses.
inline hetccl::Secret fuzzSecret() {
  hetccl::Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xA5 ^ (i * 29));
  return s;
}
constexpr uint64_t kFuzzJob = 0x1122334455667788ull;

}  // namespace fuzz
