// serverHandshake against a client that sends the fuzzer's bytes over a
// socket pair.
//
// Input byte 0, bit 0 chooses the client:
//  0 (raw): the rest of the input is written, then the client's side is shut
//    down. The server picks a fresh nonce, so no fixed byte string may be
//    accepted (that would be a replay): the handshake must fail with a
//    hetcclRemoteError.
//  1 (protocol-aware): the client reads the server's hello and answers with a
//    proof whose every field the input chooses: magic, version, hello (job,
//    rank, nranks, service), nonce, and a MAC that is valid, made with the
//    wrong secret or role (reflection), off by one bit, or raw bytes; the
//    proof may be cut short; trailing bytes follow. The server must accept
//    exactly when magic, version, MAC, job and service are all right, then
//    return the client's hello unchanged and answer with the right MAC, and
//    send nothing after its hello when it refuses.
#include "bootstrap/auth.h"
#include "fuzz_util.h"
#include "handshake_wire.h"

using namespace hetccl;
using namespace fuzz;

namespace {

constexpr Service kService = Service::kTransport;

struct Outcome {
  bool helloOk = false;         // the server's hello was well formed
  std::vector<uint8_t> answer;  // what the server sent after its hello
  ClientProof sent{};
  bool complete = false;  // the whole proof went out
  uint8_t nonceServer[16] = {};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const bool aware = in.flag();
  const Secret secret = fuzzSecret();
  auto pair = socketPair();
  Socket& server = pair.first;
  Socket& client = pair.second;

  if (!aware) {
    Writer w(client.fd(), in.rest());
    bool accepted = false;
    try {
      serverHandshake(server, secret, kFuzzJob, kService, Deadline::in(3));
      accepted = true;
    } catch (const Error& e) {
      FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
    }
    FUZZ_CHECK_MSG(!accepted, "a fixed byte string passed the handshake (replay)");
    note("raw: refused");
    w.join();
    return 0;
  }

  const uint8_t ctl = in.byte();
  const uint32_t magic = (ctl & 1) ? kProtocolMagic : in.take<uint32_t>();
  const uint32_t version = (ctl & 2) ? kProtocolVersion : in.take<uint32_t>();
  PeerHello hello;
  hello.jobId = (ctl & 4) ? kFuzzJob : in.take<uint64_t>();
  hello.rank = in.take<int32_t>();
  hello.nranks = in.take<int32_t>();
  hello.service = (ctl & 8) ? static_cast<uint32_t>(kService) : in.take<uint32_t>();
  hello.reserved = in.take<uint32_t>();
  const int macMode = (ctl >> 4) & 3;  // 0 valid, 1 wrong secret or role, 2 one bit off, 3 raw
  const bool wrongRole = (ctl & 0x40) != 0;
  const bool cut = (ctl & 0x80) != 0;
  const uint8_t cutAt = in.byte() % sizeof(ClientProof);
  const uint64_t rawMac = in.take<uint64_t>();
  const uint8_t bit = in.byte() % 64;
  std::vector<uint8_t> nonce = in.bytes(16);
  nonce.resize(16);
  std::vector<uint8_t> trailing = in.rest();

  Outcome out;
  std::thread peer([&] {
    std::vector<uint8_t> sh = readUpTo(client.fd(), sizeof(ServerHello), 3000);
    ServerHello h{};
    if (sh.size() == sizeof(h)) memcpy(&h, sh.data(), sizeof(h));
    out.helloOk = sh.size() == sizeof(h) && h.magic == kProtocolMagic && h.version == kProtocolVersion &&
                  h.service == static_cast<uint32_t>(kService);
    memcpy(out.nonceServer, h.nonce, 16);
    ClientProof& cp = out.sent;
    cp.magic = magic;
    cp.version = version;
    cp.hello = hello;
    memcpy(cp.nonce, nonce.data(), 16);
    Secret other = secret;
    other[bit % other.size()] ^= 1;
    switch (macMode) {
      case 0: cp.mac = proofMac(secret, 'C', h.nonce, cp.nonce, hello, h.reserved); break;
      case 1:
        cp.mac = wrongRole ? proofMac(secret, 'S', h.nonce, cp.nonce, hello, h.reserved)
                           : proofMac(other, 'C', h.nonce, cp.nonce, hello, h.reserved);
        break;
      case 2: cp.mac = proofMac(secret, 'C', h.nonce, cp.nonce, hello, h.reserved) ^ (uint64_t{1} << bit); break;
      default: cp.mac = rawMac;
    }
    size_t n = cut ? cutAt : sizeof(cp);
    out.complete = !cut;
    writeAll(client.fd(), &cp, n);
    if (!cut) writeAll(client.fd(), trailing.data(), trailing.size());
    ::shutdown(client.fd(), SHUT_WR);
    out.answer = readUpTo(client.fd(), 64, 5000);  // until the server's side is closed
  });

  bool accepted = false;
  PeerHello got;
  try {
    got = serverHandshake(server, secret, kFuzzJob, kService, Deadline::in(3));
    accepted = true;
  } catch (const Error& e) {
    FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
  }
  server.close();
  peer.join();

  FUZZ_CHECK(out.helloOk);
  const ClientProof& cp = out.sent;
  const bool macOk = cp.mac == proofMac(secret, 'C', out.nonceServer, cp.nonce, cp.hello);
  const bool expect = out.complete && cp.magic == kProtocolMagic && cp.version == kProtocolVersion && macOk &&
                      cp.hello.jobId == kFuzzJob && cp.hello.service == static_cast<uint32_t>(kService);
  FUZZ_CHECK_MSG(accepted == expect, accepted ? "accepted a bad proof" : "refused a valid proof");
  note(accepted ? "aware: accepted" : "aware: refused");
  if (accepted) {
    FUZZ_CHECK(sameHello(got, cp.hello));
    FUZZ_CHECK(out.answer.size() == sizeof(ServerProof));
    ServerProof sp;
    memcpy(&sp, out.answer.data(), sizeof(sp));
    FUZZ_CHECK(sp.mac == proofMac(secret, 'S', out.nonceServer, cp.nonce, cp.hello));
  } else {
    FUZZ_CHECK_MSG(out.answer.empty(), "the server answered a proof it refused");
  }
  return 0;
}
