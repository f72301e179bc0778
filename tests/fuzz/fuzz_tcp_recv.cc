// The TCP transport's progress loop (TcpTransport::run) as rank 0 with peers
// 1 and 2, each a socket pair whose other end plays the input's byte stream:
// MsgTag headers and payloads, checked against the batch the input makes
// (sends, receives and receive-reduces of any data type and op, tags with
// any field values).
//
// Input: flags (bit 0 stream built from the batch, bit 1 second peer,
// bit 2 deliver in pieces so reads split headers and elements), the batch
// (1..6 transfers), piece sizes, then per-message mutations (none, or one
// header field changed, or the stream cut inside this message) with payload
// bytes from the input; in raw mode the streams are the input's bytes.
//
// Oracle: a model of the wire format (a 32-byte MsgTag, then exactly
// tag.bytes payload bytes, messages per peer in batch order; a header must
// match the expected call and size) says whether the batch can complete.
// run() must succeed exactly then, with every receive holding the payload,
// every receive-reduce equal to reduceArrays over the whole message at once
// (so how the stream was split must not matter), and every send on the wire
// as header then payload. Otherwise it must throw hetcclInvalidUsage (tag
// mismatch) or hetcclRemoteError (stream ended).
#include <map>

#include "elements/host_reduce.h"
#include "transport/tcp/tcp_transport.h"
#include "fuzz_util.h"

using namespace hetccl;
using namespace fuzz;

namespace {

struct Planned {
  Xfer x;
  std::vector<uint8_t> buf;   // send source / receive destination
  std::vector<uint8_t> init;  // receive-reduce: dst before
};

uint8_t patternByte(size_t i, uint8_t seed) { return static_cast<uint8_t>(seed + i * 31 + (i >> 7)); }

bool headerMatches(const MsgTag& got, const Xfer& x) { return got.sameCall(x.tag) && got.bytes == x.bytes; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t flags = in.byte();
  const bool structured = flags & 1, twoPeers = flags & 2, pieces = flags & 4;
  const int npeers = twoPeers ? 2 : 1;

  // The batch.
  const int nx = 1 + in.byte() % 6;
  std::vector<Planned> plan(nx);
  for (int i = 0; i < nx; ++i) {
    Planned& p = plan[i];
    uint8_t k = in.byte();
    int peer = 1 + ((k >> 2) & 1) % npeers;
    DataType dt = static_cast<DataType>(in.byte() % hetcclNumTypes);
    RedKind rk = static_cast<RedKind>(in.byte() % 4);
    size_t bytes = (in.take<uint16_t>() % 1025) * dataTypeSize(dt);
    MsgTag t;
    t.seq = in.byte();
    t.coll = static_cast<uint16_t>(1 + in.byte() % 9);
    t.count = in.take<uint16_t>();
    t.dtype = static_cast<uint8_t>(dt);
    t.op = static_cast<uint8_t>(rk);
    t.root = static_cast<int8_t>(in.byte());
    p.buf.resize(bytes);
    for (size_t j = 0; j < bytes; ++j) p.buf[j] = patternByte(j, static_cast<uint8_t>(i * 17 + 1));
    switch (k % 3) {
      case 0: p.x = Xfer::send(peer, p.buf.data(), bytes, t); break;
      case 1: p.x = Xfer::recv(peer, p.buf.data(), bytes, t); break;
      default: p.init = p.buf; p.x = Xfer::recvReduce(peer, p.buf.data(), bytes, dt, rk, t);
    }
  }
  std::vector<size_t> pieceSizes;
  if (pieces)
    for (int i = 0; i < 8; ++i) pieceSizes.push_back(1 + in.byte() % 48);

  // The peers' streams.
  std::map<int, std::vector<uint8_t>> stream;
  if (structured) {
    std::vector<bool> cut(npeers + 1, false);
    for (Planned& p : plan) {
      if (p.x.kind == Xfer::Kind::kSend) continue;
      const int peer = p.x.peer;
      uint8_t m = in.byte();
      MsgTag h = p.x.tag;
      uint8_t delta = 1 + in.byte() % 255;
      if ((m & 0xf0) == 0xf0) {
        switch (m & 7) {
          case 0: h.seq += delta; break;
          case 1: h.count ^= delta; break;
          case 2: h.bytes += delta; break;
          case 3: h.coll ^= delta; break;
          case 4: h.dtype ^= delta; break;
          case 5: h.op ^= delta; break;
          case 6: h.root ^= delta; break;
          default: break;  // 7: the stream is cut below
        }
      }
      std::vector<uint8_t> msg(sizeof(h) + p.x.bytes);
      memcpy(msg.data(), &h, sizeof(h));
      std::vector<uint8_t> payload = in.bytes(p.x.bytes);
      for (size_t j = 0; j < p.x.bytes; ++j)
        msg[sizeof(h) + j] = j < payload.size() ? payload[j] : patternByte(j, static_cast<uint8_t>(m));
      if ((m & 0xf7) == 0xf7) msg.resize(in.take<uint16_t>() % msg.size());
      if (!cut[peer]) stream[peer].insert(stream[peer].end(), msg.begin(), msg.end());
      if (msg.size() < sizeof(h) + p.x.bytes) cut[peer] = true;
    }
    std::vector<uint8_t> trailing = in.bytes(in.byte() % 64);
    stream[1].insert(stream[1].end(), trailing.begin(), trailing.end());
  } else {
    size_t split = twoPeers ? in.take<uint16_t>() % (in.left() + 1) : in.left();
    stream[1] = in.bytes(split);
    if (twoPeers) stream[2] = in.rest();
  }

  // The model.
  bool expectOk = true;
  std::map<int, size_t> pos;
  std::vector<std::vector<uint8_t>> payloadOf(nx);
  for (int i = 0; i < nx; ++i) {
    const Xfer& x = plan[i].x;
    if (x.kind == Xfer::Kind::kSend || !expectOk) continue;
    const std::vector<uint8_t>& s = stream[x.peer];
    size_t& at = pos[x.peer];
    MsgTag h;
    if (s.size() - at < sizeof(h)) {
      expectOk = false;
      continue;
    }
    memcpy(&h, s.data() + at, sizeof(h));
    at += sizeof(h);
    if (!headerMatches(h, x) || s.size() - at < x.bytes) {
      expectOk = false;
      continue;
    }
    payloadOf[i].assign(s.begin() + at, s.begin() + at + x.bytes);
    at += x.bytes;
  }

  // Rank 0's transport over socket pairs; the harness holds the peers' ends.
  TransportContext ctx;
  ctx.rank = 0;
  ctx.nranks = 3;
  ctx.peers = {1, 2};
  ctx.timeoutS = 2;
  ctx.buffBytes = 4096;
  std::map<int, Socket> theirs, ours;
  std::map<int, int> readerFd;
  for (int peer = 1; peer <= 2; ++peer) {
    auto pair = socketPair();
    readerFd[peer] = pair.first.fd();
    ours[peer] = std::move(pair.first);
    theirs[peer] = std::move(pair.second);
  }
  TcpTransport tcp(ctx, std::move(ours));
  std::vector<std::unique_ptr<Writer>> writers;
  for (int peer = 1; peer <= 2; ++peer)
    writers.push_back(std::make_unique<Writer>(theirs[peer].fd(), stream[peer], pieceSizes, readerFd[peer]));

  std::vector<Xfer> batch;
  for (const Planned& p : plan) batch.push_back(p.x);
  bool ok = true;
  std::string why;
  try {
    tcp.run(batch);
  } catch (const Error& e) {
    ok = false;
    why = e.what();
    FUZZ_CHECK_MSG(e.code() == hetcclInvalidUsage || e.code() == hetcclRemoteError, e.what());
  }
  for (auto& w : writers) w->join();
  FUZZ_CHECK_MSG(ok == expectOk, ok ? "completed a batch the stream does not carry" : why.c_str());
  note(ok ? (pieces ? "completed (in pieces)" : "completed") : "failed as the model says");
  if (!ok) return 0;

  std::map<int, std::vector<uint8_t>> wire;
  for (int peer = 1; peer <= 2; ++peer) wire[peer] = readAvailable(theirs[peer].fd());
  std::map<int, size_t> wirePos;
  for (int i = 0; i < nx; ++i) {
    const Planned& p = plan[i];
    const Xfer& x = p.x;
    FUZZ_CHECK(batch[i].done == x.bytes);
    if (x.kind == Xfer::Kind::kSend) {
      const std::vector<uint8_t>& w = wire[x.peer];
      size_t& at = wirePos[x.peer];
      FUZZ_CHECK(w.size() - at >= sizeof(MsgTag) + x.bytes);
      MsgTag h;
      memcpy(&h, w.data() + at, sizeof(h));
      FUZZ_CHECK(headerMatches(h, x));
      FUZZ_CHECK(x.bytes == 0 || memcmp(w.data() + at + sizeof(h), p.buf.data(), x.bytes) == 0);
      at += sizeof(h) + x.bytes;
    } else if (x.kind == Xfer::Kind::kRecv) {
      FUZZ_CHECK(x.bytes == 0 || memcmp(p.buf.data(), payloadOf[i].data(), x.bytes) == 0);
    } else {
      size_t es = dataTypeSize(x.dtype);
      std::vector<uint8_t> want(x.bytes);
      if (x.bytes) reduceArrays(want.data(), p.init.data(), payloadOf[i].data(), x.bytes / es, x.dtype, x.redKind);
      FUZZ_CHECK_MSG(x.bytes == 0 || memcmp(p.buf.data(), want.data(), x.bytes) == 0,
                     "receive-reduce result depends on how the stream was split");
    }
  }
  for (int peer = 1; peer <= 2; ++peer) FUZZ_CHECK_MSG(wirePos[peer] == wire[peer].size(), "extra bytes sent");
  return 0;
}
