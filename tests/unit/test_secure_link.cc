// The tcp transport's encrypted links behind a relay that reads everything
// on the wire and attacks the stream record by record: flip a bit, replay,
// reorder, drop, truncate. The receiver must fail naming the sender within
// the timeout, never hand on altered data, and the wire must never show the
// payload; the same relay over a plaintext link shows both happen there
// (so the checks can fail).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "secure/record.h"
#include "transport/tcp/tcp_transport.h"
#include "unit_util.h"

namespace hetccl {
namespace {

enum class Attack { kNone, kFlip, kReplay, kReorder, kDrop, kTruncate };

// Sits between rank 0 (end `a`) and rank 1 (end `b`); records rank 0's bytes
// in `seen` and passes them on, attacking record 1 (encrypted) or byte
// 100000 (plaintext: a bit flip).
class Relay {
 public:
  Relay(int a, int b, Attack attack, bool records) : a_(a), b_(b), attack_(attack), records_(records) {
    th_ = std::thread([this] { loop(); });
  }
  ~Relay() { stop(); }
  void stop() {
    stop_ = true;
    if (th_.joinable()) th_.join();
  }
  std::vector<uint8_t> seen;  // read after stop()

 private:
  void put(const uint8_t* p, size_t n) {  // to rank 1, giving up once it is gone
    while (n > 0 && !stop_ && !closedB_) {
      ssize_t r = ::send(b_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        p += r;
        n -= static_cast<size_t>(r);
      } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
        pollfd pf{b_, POLLOUT, 0};
        ::poll(&pf, 1, 20);
      } else {
        closedB_ = true;
      }
    }
  }
  void passRecords() {
    for (;;) {
      if (pending_.size() < 4) return;
      uint32_t len = 0;
      memcpy(&len, pending_.data(), 4);
      size_t whole = len + secure::kRecordOverhead;
      if (pending_.size() < whole) return;
      std::vector<uint8_t> rec(pending_.begin(), pending_.begin() + whole);
      pending_.erase(pending_.begin(), pending_.begin() + whole);
      const int k = index_++;
      if (k != 1 && !(attack_ == Attack::kReorder && k == 2)) {
        put(rec.data(), rec.size());
        continue;
      }
      switch (attack_) {
        case Attack::kNone: put(rec.data(), rec.size()); break;
        case Attack::kFlip:
          rec[rec.size() / 2] ^= 0x10;
          put(rec.data(), rec.size());
          break;
        case Attack::kReplay:
          put(rec.data(), rec.size());
          put(rec.data(), rec.size());
          break;
        case Attack::kDrop: break;
        case Attack::kReorder:
          if (k == 1)
            held_ = rec;
          else
            put(rec.data(), rec.size()), put(held_.data(), held_.size());
          break;
        case Attack::kTruncate:
          put(rec.data(), rec.size() / 2);
          ::shutdown(b_, SHUT_WR);
          closedB_ = true;
          break;
      }
    }
  }
  void loop() {
    std::vector<uint8_t> buf(1 << 16);
    while (!stop_) {
      pollfd pf[2] = {{a_, POLLIN, 0}, {b_, POLLIN, 0}};
      if (::poll(pf, 2, 20) <= 0) continue;
      if (pf[0].revents & (POLLIN | POLLHUP)) {
        ssize_t r = ::recv(a_, buf.data(), buf.size(), MSG_DONTWAIT);
        if (r > 0) {
          seen.insert(seen.end(), buf.begin(), buf.begin() + r);
          if (records_) {
            pending_.insert(pending_.end(), buf.begin(), buf.begin() + r);
            passRecords();
          } else {
            const size_t at = seen.size() - static_cast<size_t>(r);
            if (attack_ == Attack::kFlip && at <= 100000 && 100000 < seen.size()) buf[100000 - at] ^= 0x10;
            put(buf.data(), static_cast<size_t>(r));
          }
        }
      }
      if (pf[1].revents & POLLIN) {  // rank 1 to rank 0: passed as it is
        ssize_t r = ::recv(b_, buf.data(), buf.size(), MSG_DONTWAIT);
        if (r > 0) ::send(a_, buf.data(), static_cast<size_t>(r), MSG_NOSIGNAL);
      }
    }
  }
  int a_, b_;
  Attack attack_;
  bool records_;
  std::vector<uint8_t> pending_, held_;
  int index_ = 0;
  bool closedB_ = false;
  std::atomic<bool> stop_{false};
  std::thread th_;
};

struct Outcome {
  std::optional<Error> sendErr, recvErr;
  double recvSeconds = 0;
  bool dataIntact = false;
  bool wireShowsPayload = false;
};

Outcome runThroughRelay(Attack attack, bool encrypted, double timeoutS = 5) {
  int p0[2], p1[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p0), 0);
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, p1), 0);
  std::vector<uint8_t> secret(32, 0x5a);
  auto ctxFor = [&](int rank) {
    TransportContext c;
    c.rank = rank;
    c.nranks = 2;
    c.peers = {1 - rank};
    c.timeoutS = timeoutS;
    c.buffBytes = 256 << 10;
    if (encrypted) c.encrypt = {1, 1};
    return c;
  };
  const size_t bytes = 1 << 20;  // four full records and a piece of a fifth
  std::vector<uint8_t> src(bytes), dst(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 10) * 7 + 3);
  MsgTag tag;
  tag.seq = 42;
  Outcome out;
  {
    Relay relay(p0[1], p1[0], attack, encrypted);
    std::map<int, Socket> c0, c1;
    c0.emplace(1, Socket(p0[0]));
    c1.emplace(0, Socket(p1[1]));
    TcpTransport t0(ctxFor(0), std::move(c0), secret);
    TcpTransport t1(ctxFor(1), std::move(c1), secret);
    std::thread sender([&] {
      Xfer x = Xfer::send(1, src.data(), bytes, tag);
      out.sendErr = test::catchError([&] { t0.run({&x, 1}); });
    });
    auto t = std::chrono::steady_clock::now();
    Xfer x = Xfer::recv(0, dst.data(), bytes, tag);
    out.recvErr = test::catchError([&] { t1.run({&x, 1}); });
    out.recvSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    t1.poison("test over");
    sender.join();
    out.dataIntact = dst == src;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    relay.stop();
    out.wireShowsPayload =
        std::search(relay.seen.begin(), relay.seen.end(), src.begin() + 5000, src.begin() + 5064) != relay.seen.end();
  }
  ::close(p0[1]);
  ::close(p1[0]);
  return out;
}

TEST(SecureLink, CarriesDataAndHidesItFromTheWire) {
  Outcome o = runThroughRelay(Attack::kNone, true);
  EXPECT_FALSE(o.sendErr) << o.sendErr->what();
  EXPECT_FALSE(o.recvErr) << o.recvErr->what();
  EXPECT_TRUE(o.dataIntact);
  EXPECT_FALSE(o.wireShowsPayload) << "plaintext on an encrypted link";
  // The same relay reads a plaintext link's payload: the check above can fail.
  Outcome p = runThroughRelay(Attack::kNone, false);
  EXPECT_TRUE(p.dataIntact);
  EXPECT_TRUE(p.wireShowsPayload);
}

TEST(SecureLink, EveryAttackFailsTheReceiverNamingThePeer) {
  const std::pair<Attack, const char*> attacks[] = {{Attack::kFlip, "failed authentication"},
                                                    {Attack::kReplay, "failed authentication"},
                                                    {Attack::kReorder, "failed authentication"},
                                                    {Attack::kDrop, "failed authentication"},
                                                    {Attack::kTruncate, "closed"}};
  for (auto [attack, says] : attacks) {
    SCOPED_TRACE("attack " + std::to_string(static_cast<int>(attack)));
    Outcome o = runThroughRelay(attack, true, 3);
    ASSERT_TRUE(o.recvErr) << "the receiver took attacked data";
    EXPECT_EQ(o.recvErr->code(), hetcclRemoteError);
    EXPECT_TRUE(test::contains(o.recvErr->what(), "tcp peer rank 0")) << o.recvErr->what();
    EXPECT_TRUE(test::contains(o.recvErr->what(), says)) << o.recvErr->what();
    EXPECT_FALSE(o.dataIntact);  // the call failed: its buffer is not claimed to hold the data
    EXPECT_LT(o.recvSeconds, 3.5);
  }
  // Over plaintext the flipped bit arrives unnoticed: what encryption is for.
  Outcome p = runThroughRelay(Attack::kFlip, false);
  EXPECT_FALSE(p.recvErr);
  EXPECT_FALSE(p.dataIntact);
}

// Bootstrap sockets: the handshake seals them where asked (HETCCL_ENCRYPT=all
// here), never for the transport service; sealed sockets carry blocking and
// progress-loop transfers of any size, and the wire shows no plaintext.
std::pair<Socket, Socket> handshaken(Service service) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Socket client(fds[0]), server(fds[1]);
  Secret secret{};
  secret[0] = 9;
  std::thread t([&] { serverHandshake(server, secret, 77, service, Deadline::in(5)); });
  PeerHello me{77, 1, 2, static_cast<uint32_t>(service), 0};
  clientHandshake(client, secret, me, Deadline::in(5), "test server");
  t.join();
  return {std::move(client), std::move(server)};
}

TEST(SealedSocket, HandshakeSealsBootstrapServicesWhereAsked) {
  {
    test::EnvGuard off("HETCCL_ENCRYPT", "off");
    auto [c, s] = handshaken(Service::kRing);
    EXPECT_FALSE(c.sealed());
    EXPECT_FALSE(s.sealed());
  }
  test::EnvGuard all("HETCCL_ENCRYPT", "all");
  for (Service svc : {Service::kRing, Service::kRoot}) {
    auto [c, s] = handshaken(svc);
    EXPECT_TRUE(c.sealed());
    EXPECT_TRUE(s.sealed());
  }
  auto [c, s] = handshaken(Service::kTransport);  // the transport seals its own links
  EXPECT_FALSE(c.sealed());
  EXPECT_FALSE(s.sealed());
}

TEST(SealedSocket, CarriesEveryTransferAndHidesThePayload) {
  test::EnvGuard all("HETCCL_ENCRYPT", "all");
  auto [c, s] = handshaken(Service::kRing);
  c.setNonBlocking(true);
  s.setNonBlocking(true);
  std::vector<uint8_t> big(700000), got(big.size());
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  // Blocking transfers, both ways at once.
  std::thread t([&] { c.sendAll(big.data(), big.size(), Deadline::in(10), "to server"); });
  s.recvAll(got.data(), got.size(), Deadline::in(10), "from client");
  t.join();
  EXPECT_EQ(got, big);
  // A progress loop as the bootstrap ring runs it: sendSome answers 0 until
  // a sealed record is out, then its plaintext; the caller passes the same
  // bytes again.
  std::fill(got.begin(), got.end(), 0);
  size_t sent = 0, recvd = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((sent < big.size() || recvd < got.size()) && std::chrono::steady_clock::now() < until) {
    if (sent < big.size()) sent += s.sendSome(big.data() + sent, big.size() - sent, "to client");
    if (recvd < got.size())
      recvd += c.recvSome(got.data() + recvd, std::min<size_t>(1000, got.size() - recvd), "from server");
  }
  EXPECT_EQ(sent, big.size());
  EXPECT_EQ(got, big);
  // What the wire carries: read the raw bytes of a sealed send.
  std::thread w([&] { c.sendAll(big.data(), 100000, Deadline::in(10), "to server"); });
  std::vector<uint8_t> raw(100000 + secure::kRecordOverhead);
  s.rawRecvAll(raw.data(), raw.size(), Deadline::in(10), "raw");
  w.join();
  EXPECT_EQ(std::search(raw.begin(), raw.end(), big.begin() + 1000, big.begin() + 1064), raw.end());
}

}  // namespace
}  // namespace hetccl
