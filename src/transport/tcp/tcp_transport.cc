#include "transport/tcp/tcp_transport.h"

#include <sys/socket.h>

#include <poll.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>

#include "elements/host_reduce.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "core/settings.h"
#include "core/error.h"
#include "core/log.h"
#include "core/workers.h"
#include "transport/progress.h"

namespace hetccl {
namespace {

// Plaintext bytes one peer's receive side may take per pass of the progress
// loop. A peer whose bytes keep arriving would otherwise hold the loop
// (reading, opening and folding) while the sends to the other peers stall
// once their socket buffers drain, and those peers wait in turn: a rank
// that borders several peers (one GPU rank facing a group of host ranks)
// then serves them one after another instead of together.
constexpr size_t kRecvPerVisit = size_t{1} << 20;

struct AddrBlock {
  sockaddr_storage ss;
  uint32_t len;
  uint32_t reserved;
};

}  // namespace

TcpTransport::TcpTransport(const TransportContext& ctx) : ctx_(ctx), threads_(hostThreadsFor(ctx.localRanks)) {
  Socket listener = Socket::listen(SockAddr::local());
  SockAddr mine = listener.boundAddr();
  std::vector<AddrBlock> addrs(ctx.nranks);
  addrs[ctx.rank].ss = mine.ss;
  addrs[ctx.rank].len = mine.len;
  ctx.bootstrap->allGather(addrs.data(), sizeof(AddrBlock));

  const IdContents& id = ctx.bootstrap->id();
  size_t sockBuf = settings::kSocketBuffer.get();
  auto setup = [&](Socket& s, int peer, const SessionNonces& n, bool client) {
    s.setNoDelay();
    s.setBuffers(sockBuf);
    addConn(peer, std::move(s), id.secret, n.bytes, client);
  };
  // Lower rank connects to higher: each pair has exactly one connection.
  size_t expectAccepts = 0;
  for (int p : ctx.peers) {
    if (p > ctx.rank) {
      ++expectAccepts;
      continue;
    }
    SockAddr a;
    if (addrs[p].len > sizeof(a.ss)) throwError(hetcclRemoteError, "tcp: bad address from rank " + std::to_string(p));
    a.ss = addrs[p].ss;
    a.len = addrs[p].len;
    std::string what = "tcp peer rank " + std::to_string(p);
    Deadline dl = Deadline::in(ctx.timeoutS, ctx.abort);
    Socket s = Socket::connect(a, dl, what);
    PeerHello me{id.jobId, ctx.rank, ctx.nranks, static_cast<uint32_t>(Service::kTransport), 0};
    SessionNonces n = clientHandshake(s, id.secret, me, dl, what);
    setup(s, p, n, true);
  }
  size_t accepted = 0;
  acceptPeers(
      listener, id.secret, id.jobId, Service::kTransport, Deadline::in(ctx.timeoutS, ctx.abort), nullptr,
      [&](const PeerHello& h, Socket& s, const SessionNonces& n) {
        bool expected = h.rank > ctx.rank && std::find(ctx.peers.begin(), ctx.peers.end(), h.rank) != ctx.peers.end();
        if (!expected || conns_.count(h.rank)) return false;
        setup(s, h.rank, n, false);
        ++accepted;
        return true;
      },
      [&] { return accepted == expectAccepts; }, "tcp: not all peers connected before the timeout");
  staging_.resize(std::max<size_t>(ctx.buffBytes, 64 * 1024));
  size_t sealed = 0;
  for (auto& [peer, c] : conns_) sealed += c.sec ? 1 : 0;
  LOG_INFO(kTransport, "tcp: rank %d connected to %zu peers (%zu encrypted, %d crypto threads each)", ctx.rank,
           conns_.size(), sealed, sealed ? threads_ : 0);
}

TcpTransport::TcpTransport(const TransportContext& ctx, std::map<int, Socket> connected,
                           std::span<const uint8_t> secret)
    : ctx_(ctx), threads_(hostThreadsFor(ctx.localRanks)) {
  const std::array<uint8_t, 32> zeros{};
  for (auto& [peer, s] : connected) addConn(peer, std::move(s), secret, zeros, ctx.rank < peer);
  staging_.resize(std::max<size_t>(ctx.buffBytes, 64 * 1024));
}

void TcpTransport::addConn(int peer, Socket s, std::span<const uint8_t> secret, std::span<const uint8_t> nonces,
                           bool client) {
  s.setNonBlocking(true);
  PeerConn c{std::move(s), "tcp peer rank " + std::to_string(peer), nullptr};
  if (static_cast<size_t>(peer) < ctx_.encrypt.size() && ctx_.encrypt[peer])
    c.sec = std::make_unique<secure::RecordChannel>(secure::deriveLinkKeys(secret, nonces, "tcp transport"), client,
                                                    ctx_.rekeyRecords, c.what, threads_, threads_ + 1);
  conns_[peer] = std::move(c);
}

TcpTransport::PeerConn& TcpTransport::conn(int peer) {
  auto it = conns_.find(peer);
  if (it == conns_.end()) throwError(hetcclInternalError, "tcp: no connection to rank " + std::to_string(peer));
  return it->second;
}

void TcpTransport::poison(const std::string&) {
  for (auto& [peer, c] : conns_) ::shutdown(c.sock.fd(), SHUT_RDWR);
}

// Per peer and direction: the transfers in order and the one in progress.
struct TcpTransport::Lane {
  std::deque<Xfer*> q;
  MsgTag hdr;          // send: the header being sent; recv: being received
  size_t hdrDone = 0;  // header bytes moved
  uint8_t carry[8];    // recv-reduce: bytes of an element split across reads
  size_t carryLen = 0;
  const Xfer* last = nullptr;  // send: the last transfer sealed (its record may still be on the way)
};

size_t TcpTransport::pull(PeerConn& c, void* dst, size_t n) {
  if (!c.sec) return c.sock.recvSome(dst, n, c.what);
  return c.sec->recvSome([&c](uint8_t* p, size_t k) { return c.sock.recvSome(p, k, c.what); },
                         static_cast<uint8_t*>(dst), n);
}

bool TcpTransport::pushSealed(PeerConn& c, Lane& lane) {
  bool moved = false;
  auto send = [&c](const uint8_t* p, size_t k) { return c.sock.sendSome(p, k, c.what); };
  std::array<MsgTag, 16> hdrs;                       // the headers that records of this batch begin with
  std::vector<secure::PlainRecord>& batch = batch_;  // reused across calls
  const size_t most = std::min<size_t>(static_cast<size_t>(threads_), hdrs.size());
  for (;;) {
    if (c.sec->pending()) {
      moved |= c.sec->flush(send) > 0;
      if (c.sec->pending()) return moved;  // socket buffer full
    }
    if (lane.q.empty()) return moved;
    // The next records, one per sealing thread: each holds what is left of
    // its transfer's header and as much of its payload as a record holds.
    batch.clear();
    size_t nhdr = 0;
    while (!lane.q.empty() && batch.size() < most) {
      Xfer* x = lane.q.front();
      if (lane.hdrDone == 0 && x->done == 0) lane.hdr = x->tag;
      const size_t h = sizeof(MsgTag) - lane.hdrDone;
      const size_t p = std::min(x->bytes - x->done, secure::kMaxRecordPlain - h);
      secure::PlainRecord r;
      if (h > 0) {
        hdrs[nhdr] = lane.hdr;
        r.piece[0] = {reinterpret_cast<const uint8_t*>(&hdrs[nhdr++]) + lane.hdrDone, h};
      }
      r.piece[1] = {static_cast<const uint8_t*>(x->src) + x->done, p};
      batch.push_back(r);
      lane.hdrDone += h;
      x->done += p;
      lane.last = x;
      if (x->done == x->bytes) {
        lane.q.pop_front();
        lane.hdrDone = 0;
      }
    }
    c.sec->seal(batch);
  }
}

void TcpTransport::run(std::span<Xfer> xfers) {
  struct PeerWork {
    PeerConn* c;
    Lane send, recv;
  };
  std::map<int, PeerWork> work;
  for (Xfer& x : xfers) {
    x.done = 0;
    auto& w = work[x.peer];
    if (!w.c) w.c = &conn(x.peer);
    (x.kind == Xfer::Kind::kSend ? w.send : w.recv).q.push_back(&x);
  }
  ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "tcp");
  std::vector<pollfd> pfds;
  std::vector<PeerWork*> pw;
  for (;;) {
    bool progress = false;
    bool pending = false;
    const Xfer* oneWaiting = nullptr;
    for (auto& [peer, w] : work) {
      if (w.c->sec) progress |= pushSealed(*w.c, w.send);
      // Send side: header then payload, in one writev where possible.
      while (!w.c->sec && !w.send.q.empty()) {
        Xfer* x = w.send.q.front();
        if (w.send.hdrDone == 0 && x->done == 0) w.send.hdr = x->tag;
        iovec iov[2];
        int n = 0;
        if (w.send.hdrDone < sizeof(MsgTag))
          iov[n++] = {reinterpret_cast<uint8_t*>(&w.send.hdr) + w.send.hdrDone, sizeof(MsgTag) - w.send.hdrDone};
        if (x->done < x->bytes)
          iov[n++] = {const_cast<uint8_t*>(static_cast<const uint8_t*>(x->src)) + x->done, x->bytes - x->done};
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<size_t>(n);
        ssize_t r = sendmsg(w.c->sock.fd(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);  // a dead peer is an error, not SIGPIPE
        if (r < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
          if (errno == EPIPE || errno == ECONNRESET)
            throwError(hetcclRemoteError,
                       "tcp: rank " + std::to_string(peer) + " closed the connection during " + x->tag.describe());
          throwSystemError("tcp send to rank " + std::to_string(peer), errno);
        }
        size_t moved = static_cast<size_t>(r);
        if (moved > 0) progress = true;
        size_t h = std::min(moved, sizeof(MsgTag) - w.send.hdrDone);
        w.send.hdrDone += h;
        x->done += moved - h;
        if (w.send.hdrDone == sizeof(MsgTag) && x->done == x->bytes) {
          w.send.q.pop_front();
          w.send.hdrDone = 0;
          continue;
        }
        break;  // socket buffer full
      }
      // Receive side, up to kRecvPerVisit bytes this pass.
      size_t pulled = 0;
      while (!w.recv.q.empty() && pulled < kRecvPerVisit) {
        Xfer* x = w.recv.q.front();
        if (w.recv.hdrDone < sizeof(MsgTag)) {
          size_t r =
              pull(*w.c, reinterpret_cast<uint8_t*>(&w.recv.hdr) + w.recv.hdrDone, sizeof(MsgTag) - w.recv.hdrDone);
          if (r == 0) break;
          progress = true;
          w.recv.hdrDone += r;
          if (w.recv.hdrDone < sizeof(MsgTag)) break;
          if (!w.recv.hdr.sameCall(x->tag) || w.recv.hdr.bytes != x->bytes)
            throwMismatch("tcp", ctx_.rank, *x, w.recv.hdr);
        }
        if (x->kind == Xfer::Kind::kRecv) {
          if (x->done < x->bytes) {
            size_t r = pull(*w.c, static_cast<uint8_t*>(x->dst) + x->done, x->bytes - x->done);
            if (r == 0) break;
            progress = true;
            x->done += r;
            pulled += r;
          }
        } else if (x->done < x->bytes) {
          // Receive into staging after any carried partial element, reduce
          // the whole elements, carry the rest.
          size_t es = dataTypeSize(x->dtype);
          memcpy(staging_.data(), w.recv.carry, w.recv.carryLen);
          size_t want = std::min(staging_.size() - w.recv.carryLen, x->bytes - x->done - w.recv.carryLen);
          size_t r = pull(*w.c, staging_.data() + w.recv.carryLen, want);
          if (r == 0) break;
          progress = true;
          pulled += r;
          size_t avail = w.recv.carryLen + r;
          size_t whole = avail / es * es;
          uint8_t* dst = static_cast<uint8_t*>(x->dst) + x->done;
          reduceArrays(dst, x->operand(x->done), staging_.data(), whole / es, x->dtype, x->redKind);
          x->done += whole;
          w.recv.carryLen = avail - whole;
          memcpy(w.recv.carry, staging_.data() + whole, w.recv.carryLen);
        }
        if (x->done == x->bytes) {
          w.recv.q.pop_front();
          w.recv.hdrDone = 0;
          continue;
        }
      }
      if (!w.send.q.empty())
        pending = true, oneWaiting = w.send.q.front();
      else if (w.c->sec && w.c->sec->pending())
        pending = true, oneWaiting = w.send.last;
      if (!w.recv.q.empty()) pending = true, oneWaiting = w.recv.q.front();
    }
    if (!pending) return;
    if (progress) {
      watch.madeProgress();
      continue;
    }
    watch.check(oneWaiting ? *oneWaiting : xfers.front());  // null only where sealed bytes of no transfer wait
    pfds.clear();
    for (auto& [peer, w] : work) {
      const bool out = !w.send.q.empty() || (w.c->sec && w.c->sec->pending());
      short ev = (out ? POLLOUT : 0) | (w.recv.q.empty() ? 0 : POLLIN);
      if (ev) pfds.push_back(pollfd{w.c->sock.fd(), ev, 0});
    }
    ::poll(pfds.data(), pfds.size(), 100);
  }
}

}  // namespace hetccl
