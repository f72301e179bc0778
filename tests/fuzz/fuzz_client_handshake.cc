// clientHandshake against a server that sends the fuzzer's bytes over a
// socket pair.
//
// Input byte 0, bit 0 chooses the server:
//  0 (raw): the rest of the input is written, then the server's side is shut
//    down. The client's nonce is fresh, so no fixed byte string may pass as
//    the server's proof: the handshake must fail with a hetcclRemoteError.
//  1 (protocol-aware): the server sends a hello whose magic, version,
//    service and nonce the input chooses (or cuts it short), reads the
//    client's proof, and answers with a proof that is valid, made with the
//    wrong secret, the client's own MAC reflected back, off by one bit, or
//    raw bytes (or no proof at all). The client must accept exactly when the
//    hello and the proof are right; it must send its proof (well formed, for
//    its own hello, with a valid MAC) only after a well-formed hello.
#include "bootstrap/auth.h"
#include "fuzz_util.h"
#include "handshake_wire.h"

using namespace hetccl;
using namespace fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const bool aware = in.flag();
  const Secret secret = fuzzSecret();
  auto pair = socketPair();
  Socket& client = pair.first;
  Socket& server = pair.second;

  PeerHello me;
  me.jobId = kFuzzJob;
  me.rank = 1;
  me.nranks = 2;
  me.service = static_cast<uint32_t>(Service::kTransport);

  if (!aware) {
    Writer w(server.fd(), in.rest());
    bool accepted = false;
    try {
      clientHandshake(client, secret, me, Deadline::in(3), "fuzz server");
      accepted = true;
    } catch (const Error& e) {
      FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
    }
    FUZZ_CHECK_MSG(!accepted, "a fixed byte string passed as the server's proof (replay)");
    note("raw: refused");
    w.join();
    return 0;
  }

  const uint8_t ctl = in.byte();
  ServerHello sh{};
  sh.magic = (ctl & 1) ? kProtocolMagic : in.take<uint32_t>();
  sh.version = (ctl & 2) ? kProtocolVersion : in.take<uint32_t>();
  sh.service = (ctl & 4) ? me.service : in.take<uint32_t>();
  sh.reserved = in.take<uint32_t>();
  std::vector<uint8_t> nonce = in.bytes(16);
  nonce.resize(16);
  memcpy(sh.nonce, nonce.data(), 16);
  const int proofMode = (ctl >> 3) & 3;  // 0 valid, 1 wrong secret or reflected, 2 one bit off, 3 raw
  const bool reflect = (ctl & 0x20) != 0;
  const bool cutHello = (ctl & 0x40) != 0;
  const bool noProof = (ctl & 0x80) != 0;
  const uint8_t cutAt = in.byte() % sizeof(ServerHello);
  const uint64_t rawMac = in.take<uint64_t>();
  const uint8_t bit = in.byte() % 64;
  std::vector<uint8_t> trailing = in.rest();

  std::vector<uint8_t> proofBytes;  // what the client sent
  uint64_t answered = 0;
  bool proofSent = false;
  std::thread peer([&] {
    writeAll(server.fd(), &sh, cutHello ? cutAt : sizeof(sh));
    if (cutHello) {
      ::shutdown(server.fd(), SHUT_WR);
      proofBytes = readUpTo(server.fd(), sizeof(ClientProof), 5000);
      return;
    }
    proofBytes = readUpTo(server.fd(), sizeof(ClientProof), 5000);
    if (proofBytes.size() == sizeof(ClientProof) && !noProof) {
      ClientProof cp;
      memcpy(&cp, proofBytes.data(), sizeof(cp));
      Secret other = secret;
      other[bit % other.size()] ^= 1;
      switch (proofMode) {
        case 0: answered = proofMac(secret, 'S', sh.nonce, cp.nonce, cp.hello, sh.reserved); break;
        case 1: answered = reflect ? cp.mac : proofMac(other, 'S', sh.nonce, cp.nonce, cp.hello, sh.reserved); break;
        case 2:
          answered = proofMac(secret, 'S', sh.nonce, cp.nonce, cp.hello, sh.reserved) ^ (uint64_t{1} << bit);
          break;
        default: answered = rawMac;
      }
      ServerProof sp{answered};
      writeAll(server.fd(), &sp, sizeof(sp));
      writeAll(server.fd(), trailing.data(), trailing.size());
      proofSent = true;
    }
    ::shutdown(server.fd(), SHUT_WR);
  });

  bool accepted = false;
  try {
    clientHandshake(client, secret, me, Deadline::in(3), "fuzz server");
    accepted = true;
  } catch (const Error& e) {
    FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
  }
  client.close();
  peer.join();

  const bool helloOk =
      !cutHello && sh.magic == kProtocolMagic && sh.version == kProtocolVersion && sh.service == me.service;
  if (!helloOk) {
    FUZZ_CHECK_MSG(!accepted, "accepted a bad server hello");
    FUZZ_CHECK_MSG(proofBytes.empty(), "the client answered a bad server hello");
    note("aware: bad hello refused");
    return 0;
  }
  // The client's proof: for its own hello, with a valid MAC over both nonces.
  FUZZ_CHECK(proofBytes.size() == sizeof(ClientProof));
  ClientProof cp;
  memcpy(&cp, proofBytes.data(), sizeof(cp));
  FUZZ_CHECK(cp.magic == kProtocolMagic && cp.version == kProtocolVersion);
  FUZZ_CHECK(sameHello(cp.hello, me));
  FUZZ_CHECK(cp.mac == proofMac(secret, 'C', sh.nonce, cp.nonce, me, sh.reserved));
  const bool expect = proofSent && answered == proofMac(secret, 'S', sh.nonce, cp.nonce, me, sh.reserved);
  FUZZ_CHECK_MSG(accepted == expect, accepted ? "accepted a bad server proof" : "refused a valid server proof");
  note(accepted ? "aware: accepted" : "aware: bad proof refused");
  return 0;
}
