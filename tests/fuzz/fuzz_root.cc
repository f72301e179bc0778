// The rendezvous root's admission of ranks (bootstrap/root_server.h), one
// connection after another on this thread, against a fresh root per input;
// no listener and no root thread, so every input is quick and deterministic.
//
// The input is a list of up to 8 connections. Each is either raw bytes
// (must never get past the handshake) or a client that passes the handshake
// with the library's clientHandshake, announcing a hello (job, service, rank,
// nranks) of the input's choosing, then sends a record-size field, a record
// and trailing bytes, each as the input says (sizes that disagree with the
// record, out of range, cut short). Connections stop once the root has every
// rank; then it replies to all.
//
// Oracle: raw clients get the server's hello and nothing else; every refusal
// is one well-formed header (status 1, terminated message); the table comes
// only once the root is complete, to exactly nranks ranks with distinct rank
// numbers, and row r is the record the client of rank r sent (the record
// size and nranks it announced).
#include <map>

#include "bootstrap/root_server.h"
#include "fuzz_util.h"
#include "handshake_wire.h"

using namespace hetccl;
using namespace fuzz;
using rootimpl::ReplyHeader;
using rootimpl::RootServer;

namespace {

struct Conn {
  Socket mine;  // the client's end
  bool raw = false;
  bool authenticated = false;  // clientHandshake succeeded
  PeerHello hello;
  uint32_t lenField = 0;
  std::vector<uint8_t> sent;  // everything after the handshake
};

IdContents job() {
  IdContents id;
  auto* a = reinterpret_cast<sockaddr_in*>(&id.root.ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  id.root.len = sizeof(sockaddr_in);
  id.jobId = kFuzzJob;
  id.secret = fuzzSecret();
  return id;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const IdContents id = job();
  RootServer root(Socket(), id, 60);
  std::vector<Conn> conns;
  const int nconn = 1 + in.byte() % 8;
  for (int i = 0; i < nconn && !root.done(); ++i) {
    const uint8_t mode = in.byte();
    auto pair = socketPair();
    Conn c;
    c.mine = std::move(pair.first);
    if (!(mode & 1)) {
      c.raw = true;
      c.sent = in.bytes(in.take<uint16_t>() % 512);
      writeAll(c.mine.fd(), c.sent.data(), c.sent.size());
      ::shutdown(c.mine.fd(), SHUT_WR);
      root.admit(std::move(pair.second));
    } else {
      c.hello.jobId = (mode & 2) ? kFuzzJob : in.take<uint64_t>();
      c.hello.service = (mode & 4) ? static_cast<uint32_t>(Service::kRoot) : in.take<uint32_t>();
      if (mode & 8) {
        c.hello.nranks = in.take<int32_t>();
        c.hello.rank = in.take<int32_t>();
      } else {
        c.hello.nranks = in.byte() % 5;    // 0..4
        c.hello.rank = in.byte() % 6 - 1;  // -1..4
      }
      std::vector<uint8_t> record = in.bytes((mode & 0x10) ? in.take<uint16_t>() % 2048 : in.byte());
      c.lenField = (mode & 0x20) ? in.take<uint32_t>() : static_cast<uint32_t>(record.size());
      std::vector<uint8_t> extra = (mode & 0x40) ? in.bytes(in.byte()) : std::vector<uint8_t>{};
      const bool noLen = (mode & 0x80) != 0;  // stop right after the handshake
      if (!noLen) {
        c.sent.resize(4);
        memcpy(c.sent.data(), &c.lenField, 4);
        c.sent.insert(c.sent.end(), record.begin(), record.end());
        c.sent.insert(c.sent.end(), extra.begin(), extra.end());
      }
      std::thread client([&] {
        try {
          clientHandshake(c.mine, id.secret, c.hello, Deadline::in(5), "fuzz root");
          c.authenticated = true;
          writeAll(c.mine.fd(), c.sent.data(), c.sent.size());
        } catch (const Error& e) {
          FUZZ_CHECK_MSG(e.code() == hetcclRemoteError, e.what());
        }
        ::shutdown(c.mine.fd(), SHUT_WR);
      });
      root.admit(std::move(pair.second));
      client.join();
      // The handshake passes exactly for this job's root clients.
      FUZZ_CHECK(c.authenticated ==
                 (c.hello.jobId == kFuzzJob && c.hello.service == static_cast<uint32_t>(Service::kRoot)));
    }
    conns.push_back(std::move(c));
  }
  const bool complete = root.done();
  if (complete) root.reply();

  std::map<int, const Conn*> admitted;  // by rank, those that got the table
  uint32_t tableRanks = 0, tableRecord = 0;
  // A client may report its rank's failure instead of a record (the size
  // field's kFailedRecord bit): the root then refuses every rank with it.
  bool failureReported = false;
  for (const Conn& c : conns) {
    if (c.authenticated && c.sent.size() >= 4 && (c.lenField & kFailedRecord)) failureReported = true;
    std::vector<uint8_t> got = readAvailable(c.mine.fd());
    if (c.raw) {
      FUZZ_CHECK(got.size() == sizeof(ServerHello));
      ServerHello sh;
      memcpy(&sh, got.data(), sizeof(sh));
      FUZZ_CHECK(sh.magic == kProtocolMagic && sh.version == kProtocolVersion &&
                 sh.service == static_cast<uint32_t>(Service::kRoot));
      continue;
    }
    if (got.empty()) {  // dropped, or admitted while the root waits for others
      note(c.authenticated ? "authenticated, no reply" : "not authenticated");
      continue;
    }
    FUZZ_CHECK(c.authenticated);
    FUZZ_CHECK(got.size() >= sizeof(ReplyHeader));
    ReplyHeader h;
    memcpy(&h, got.data(), sizeof(h));
    if (h.status != 0) {
      FUZZ_CHECK(h.status == 1 && got.size() == sizeof(h));
      FUZZ_CHECK(memchr(h.msg, 0, sizeof(h.msg)) != nullptr && h.msg[0] != 0);
      note("refused");
      continue;
    }
    FUZZ_CHECK_MSG(complete, "a rank got the table before every rank arrived");
    FUZZ_CHECK(h.nranks == static_cast<uint32_t>(c.hello.nranks) && h.recordBytes == c.lenField);
    FUZZ_CHECK(h.recordBytes > 0 && h.recordBytes <= kMaxRecordBytes);
    FUZZ_CHECK(got.size() == sizeof(h) + static_cast<size_t>(h.nranks) * h.recordBytes);
    FUZZ_CHECK(c.sent.size() >= 4 + h.recordBytes);
    FUZZ_CHECK(c.hello.rank >= 0 && c.hello.rank < c.hello.nranks);
    FUZZ_CHECK_MSG(admitted.emplace(c.hello.rank, &c).second, "two clients admitted as one rank");
    if (admitted.size() == 1) tableRanks = h.nranks, tableRecord = h.recordBytes;
    note("got the table");
    FUZZ_CHECK(h.nranks == tableRanks && h.recordBytes == tableRecord);
    // Every row is what its rank's client sent.
    for (const auto& [r, other] : admitted)
      FUZZ_CHECK(memcmp(got.data() + sizeof(h) + static_cast<size_t>(r) * h.recordBytes, other->sent.data() + 4,
                        h.recordBytes) == 0);
  }
  if (complete) note("root complete");
  if (complete)
    FUZZ_CHECK_MSG((admitted.size() == tableRanks && tableRanks > 0) || (admitted.empty() && failureReported),
                   "complete root left ranks without the table");
  return 0;
}
