#include "bootstrap/auth.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "secure/aead.h"
#include "secure/record.h"

namespace hetccl {
namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline void sipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = rotl(v1, 13);
  v1 ^= v0;
  v0 = rotl(v0, 32);
  v2 += v3;
  v3 = rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = rotl(v1, 17);
  v1 ^= v2;
  v2 = rotl(v2, 32);
}

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64 as configured)
}

struct ServerHello {
  uint32_t magic, version, service, reserved;
  uint8_t nonce[16];
};
struct ClientProof {
  uint32_t magic, version;
  PeerHello hello;
  uint8_t nonce[16];
  uint64_t mac;
};
struct ServerProof {
  uint64_t mac;
};

struct MacInput {
  char role;
  uint8_t serverFlags;  // the server hello's flags (kHelloSeal)
  uint8_t pad[6];
  uint8_t nonceServer[16];
  uint8_t nonceClient[16];
  PeerHello hello;
};

uint64_t proof(const Secret& s, char role, const uint8_t* ns, const uint8_t* nc, const PeerHello& h,
               uint32_t serverFlags) {
  MacInput in{};
  in.role = role;
  in.serverFlags = static_cast<uint8_t>(serverFlags & 0xff);
  memcpy(in.nonceServer, ns, 16);
  memcpy(in.nonceClient, nc, 16);
  in.hello = h;
  return secretMac(s, &in, sizeof(in));
}

bool sealable(uint32_t service) {
  return service == static_cast<uint32_t>(Service::kRoot) || service == static_cast<uint32_t>(Service::kRing);
}

// Seals a bootstrap connection both ends agreed to seal.
void sealIfAsked(const Socket& s, const Secret& secret, const SessionNonces& n, uint32_t service, uint32_t clientFlags,
                 uint32_t serverFlags, bool client, const std::string& what) {
  if (!sealable(service) || !((clientFlags | serverFlags) & kHelloSeal)) return;
  secure::requireCrypto();
  s.seal(secure::deriveLinkKeys(secret, n.bytes, "bootstrap"), client, what + " (sealed)");
}

}  // namespace

bool bootstrapSealWanted() {
  const std::string mode = settings::kEncrypt.get();
  return mode == "all" || (mode == "cross-site" && (settings::kSite.isSet() || settings::kSiteMap.isSet()));
}

uint64_t sipHash24(const uint8_t key[16], const void* data, size_t len) {
  uint64_t k0 = load64(key), k1 = load64(key + 8);
  uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
  uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
  auto* p = static_cast<const uint8_t*>(data);
  size_t full = len & ~size_t{7};
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = load64(p + i);
    v3 ^= m;
    sipRound(v0, v1, v2, v3);
    sipRound(v0, v1, v2, v3);
    v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(len) << 56;
  for (size_t i = 0; i < (len & 7); ++i) b |= static_cast<uint64_t>(p[full + i]) << (8 * i);
  v3 ^= b;
  sipRound(v0, v1, v2, v3);
  sipRound(v0, v1, v2, v3);
  v0 ^= b;
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) sipRound(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t secretMac(const Secret& secret, const void* data, size_t len) {
  uint64_t a = sipHash24(secret.data(), data, len);
  return sipHash24(secret.data() + 16, &a, sizeof(a)) ^ a;
}

void randomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throwSystemError("getrandom", errno);
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

SessionNonces clientHandshake(const Socket& s, const Secret& secret, const PeerHello& me, const Deadline& dl,
                              const std::string& what) {
  ServerHello sh{};
  s.recvAll(&sh, sizeof(sh), dl, what + " (handshake)");
  if (sh.magic != kProtocolMagic)
    throwError(hetcclRemoteError, what + ": not a hetccl endpoint (bad magic in handshake)");
  if (sh.version != kProtocolVersion)
    throwError(hetcclRemoteError, what + ": protocol version " + std::to_string(sh.version) + " where " +
                                      std::to_string(kProtocolVersion) + " is spoken");
  if (sh.service != me.service) throwError(hetcclRemoteError, what + ": endpoint serves another kind of connection");
  ClientProof cp{};
  cp.magic = kProtocolMagic;
  cp.version = kProtocolVersion;
  cp.hello = me;
  if (sealable(me.service) && bootstrapSealWanted()) cp.hello.reserved |= kHelloSeal;
  randomBytes(cp.nonce, sizeof(cp.nonce));
  cp.mac = proof(secret, 'C', sh.nonce, cp.nonce, cp.hello, sh.reserved);
  s.sendAll(&cp, sizeof(cp), dl, what + " (handshake)");
  ServerProof sp{};
  s.recvAll(&sp, sizeof(sp), dl, what + " (handshake: the peer refused this rank's proof of the job secret)");
  if (sp.mac != proof(secret, 'S', sh.nonce, cp.nonce, cp.hello, sh.reserved))
    throwError(hetcclRemoteError, what + ": peer does not know the job secret (unique id of another job?)");
  SessionNonces n;
  memcpy(n.bytes.data(), sh.nonce, 16);
  memcpy(n.bytes.data() + 16, cp.nonce, 16);
  sealIfAsked(s, secret, n, me.service, cp.hello.reserved, sh.reserved, true, what);
  return n;
}

PeerHello serverHandshake(const Socket& s, const Secret& secret, uint64_t jobId, Service service, const Deadline& dl,
                          SessionNonces* nonces) {
  ServerHello sh{};
  sh.magic = kProtocolMagic;
  sh.version = kProtocolVersion;
  sh.service = static_cast<uint32_t>(service);
  if (sealable(sh.service) && bootstrapSealWanted()) sh.reserved |= kHelloSeal;
  randomBytes(sh.nonce, sizeof(sh.nonce));
  s.sendAll(&sh, sizeof(sh), dl, "handshake");
  ClientProof cp{};
  s.recvAll(&cp, sizeof(cp), dl, "handshake");
  if (cp.magic != kProtocolMagic) throwError(hetcclRemoteError, "handshake: client is not hetccl (bad magic)");
  if (cp.version != kProtocolVersion)
    throwError(hetcclRemoteError, "handshake: client speaks protocol version " + std::to_string(cp.version));
  if (cp.mac != proof(secret, 'C', sh.nonce, cp.nonce, cp.hello, sh.reserved))
    throwError(hetcclRemoteError, "handshake: client failed to prove the job secret");
  if (cp.hello.jobId != jobId || cp.hello.service != static_cast<uint32_t>(service))
    throwError(hetcclRemoteError, "handshake: client belongs to another communicator or service");
  ServerProof sp{proof(secret, 'S', sh.nonce, cp.nonce, cp.hello, sh.reserved)};
  s.sendAll(&sp, sizeof(sp), dl, "handshake");
  SessionNonces n;
  memcpy(n.bytes.data(), sh.nonce, 16);
  memcpy(n.bytes.data() + 16, cp.nonce, 16);
  if (nonces) *nonces = n;
  sealIfAsked(s, secret, n, sh.service, cp.hello.reserved, sh.reserved, false,
              "bootstrap connection from rank " + std::to_string(cp.hello.rank));
  return cp.hello;
}

void acceptPeers(const Socket& listener, const Secret& secret, uint64_t jobId, Service service, const Deadline& dl,
                 const std::atomic<bool>* stop,
                 const std::function<bool(const PeerHello&, Socket&, const SessionNonces&)>& take,
                 const std::function<bool()>& done, const std::string& timeoutWhat) {
  std::mutex mu;
  std::atomic<bool> cancel{false};  // set when this call returns: vetting threads give up
  std::vector<std::thread> vetting;
  std::exception_ptr error;
  Waker vetted;  // a vetting thread finished: done() may hold now
  auto finished = [&] {
    std::lock_guard<std::mutex> g(mu);
    return done();
  };
  try {
    while (!finished()) {
      if (stop && stop->load()) break;
      if (dl.aborted()) throwError(hetcclRemoteError, timeoutWhat + " (communicator aborted)");
      if (dl.passed()) throwError(hetcclRemoteError, timeoutWhat);
      Socket s = listener.accept(dl.sliceMs(), &vetted);
      if (!s.valid()) continue;
      vetting.emplace_back([&, s = std::move(s)]() mutable {
        struct Notify {
          const Waker& w;
          ~Notify() { w.notify(); }
        } notify{vetted};
        Deadline hs = Deadline::in(10, &cancel);
        if (hs.at > dl.at) hs.at = dl.at;
        try {
          SessionNonces nonces;
          PeerHello h = serverHandshake(s, secret, jobId, service, hs, &nonces);
          std::lock_guard<std::mutex> g(mu);
          if (!take(h, s, nonces))
            throw Error(hetcclRemoteError, "unexpected connection from rank " + std::to_string(h.rank));
        } catch (const Error& e) {
          LOG_WARN(kBootstrap, "dropped a connection: %s", e.what());
        }
      });
    }
  } catch (...) {
    error = std::current_exception();
  }
  cancel.store(true);
  for (auto& t : vetting) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace hetccl
