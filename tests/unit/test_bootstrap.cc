// bootstrap/: SipHash and MACs, the unique id, addresses, sockets with
// deadlines and abort, the authenticated handshake, the rendezvous root and
// the bootstrap ring (ranks as threads of this process).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launcher.h"
#include "bootstrap/root.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "unit_util.h"

namespace hetccl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---- SipHash-2-4 and MACs ----

TEST(SipHash, ReferenceVectors) {
  uint8_t key[16], msg[64];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) msg[i] = static_cast<uint8_t>(i);
  // From the SipHash paper (appendix A) and the reference implementation's vectors.
  EXPECT_EQ(sipHash24(key, msg, 15), 0xa129ca6149be45e5ull);
  EXPECT_EQ(sipHash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(sipHash24(key, msg, 1), 0x74f839c593dc67fdull);
  EXPECT_EQ(sipHash24(key, msg, 2), 0x0d6c8009d9a94f5aull);
  EXPECT_EQ(sipHash24(key, msg, 3), 0x85676696d7fb7e2dull);
  EXPECT_EQ(sipHash24(key, msg, 8), 0x93f5f5799a932462ull);
  const uint8_t zero[16] = {};
  EXPECT_EQ(sipHash24(zero, "", 0), 0x1e924b9d737700d7ull);
  EXPECT_EQ(sipHash24(zero, "Hello world", 11), 0xc9e8a3021f3822d9ull);
  const uint8_t eightZeros[8] = {};
  EXPECT_EQ(sipHash24(zero, eightZeros, 8), 0xe849e8bb6ffe2567ull);
}

TEST(SecretMac, DependsOnEveryKeyByteAndTheData) {
  Secret s{};
  for (int i = 0; i < 32; ++i) s[i] = static_cast<uint8_t>(i * 7);
  const char data[] = "challenge";
  uint64_t base = secretMac(s, data, sizeof(data));
  EXPECT_EQ(base, secretMac(s, data, sizeof(data)));
  for (int i = 0; i < 32; ++i) {  // both halves of the secret matter
    Secret t = s;
    t[i] ^= 1;
    EXPECT_NE(secretMac(t, data, sizeof(data)), base) << "key byte " << i;
  }
  EXPECT_NE(secretMac(s, data, sizeof(data) - 1), base);
  Secret r1, r2;  // random secrets differ
  randomBytes(r1.data(), r1.size()), randomBytes(r2.data(), r2.size());
  EXPECT_NE(r1, r2);
}

// ---- unique id ----

TEST(UniqueId, RoundTripV4AndV6) {
  for (const char* addr : {"10.1.2.3:29500", "[::1]:5", "[fe80::1:2]:65535"}) {
    IdContents c = newIdContents(SockAddr::parse(addr));
    hetcclUniqueId id = encodeUniqueId(c);
    IdContents d = decodeUniqueId(id);
    EXPECT_EQ(d.root.str(), c.root.str()) << addr;
    EXPECT_EQ(d.root.len, c.root.len);
    EXPECT_EQ(d.jobId, c.jobId);
    EXPECT_EQ(d.secret, c.secret);
  }
  SockAddr a = SockAddr::parse("127.0.0.1:1");
  IdContents x = newIdContents(a), y = newIdContents(a);
  EXPECT_NE(x.secret, y.secret);
  EXPECT_NE(x.jobId, y.jobId);
}

TEST(UniqueId, BadMagicVersionAndFamilyAreInvalidArgument) {
  hetcclUniqueId zero{};
  EXPECT_HETCCL_ERROR(decodeUniqueId(zero), hetcclInvalidArgument, "bad magic");
  hetcclUniqueId id = encodeUniqueId(newIdContents(SockAddr::parse("127.0.0.1:9")));
  hetcclUniqueId v = id;
  v.internal[4] = 9;  // version (uint16 after the magic)
  EXPECT_HETCCL_ERROR(decodeUniqueId(v), hetcclInvalidArgument, "version 9");
  hetcclUniqueId f = id;
  f.internal[6] = 99;  // address family
  f.internal[7] = 0;
  EXPECT_HETCCL_ERROR(decodeUniqueId(f), hetcclInvalidArgument, "family");
}

// A grow id carries the running communicator's size; hetcclGetUniqueId's
// carries 0; a size past the rendezvous root's limit is refused.
TEST(UniqueId, GrowIdCarriesTheRunningSize) {
  IdContents c = newIdContents(SockAddr::parse("127.0.0.1:9"));
  EXPECT_EQ(decodeUniqueId(encodeUniqueId(c)).growFrom, 0);
  c.growFrom = 3;
  EXPECT_EQ(decodeUniqueId(encodeUniqueId(c)).growFrom, 3);
  hetcclUniqueId big = encodeUniqueId(c);
  const uint32_t tooMany = (1u << 20) + 1;
  memcpy(big.internal + 28, &tooMany, sizeof(tooMany));  // after magic, version, family, port, reserved, address
  EXPECT_HETCCL_ERROR(decodeUniqueId(big), hetcclInvalidArgument, "1048577 ranks");
}

// ---- addresses ----

TEST(SockAddr, Parse) {
  SockAddr a = SockAddr::parse("127.0.0.1:80");
  EXPECT_EQ(a.ss.ss_family, AF_INET);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.str(), "127.0.0.1:80");
  SockAddr b = SockAddr::parse("[::1]:5");
  EXPECT_EQ(b.ss.ss_family, AF_INET6);
  EXPECT_EQ(b.port(), 5);
  EXPECT_EQ(b.str(), "[::1]:5");
  SockAddr c = SockAddr::parse("localhost:1");
  EXPECT_TRUE((c.ss.ss_family == AF_INET || c.ss.ss_family == AF_INET6) && c.port() == 1);
  c.setPort(4242);
  EXPECT_EQ(c.port(), 4242);
  for (const char* bad : {"", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536", "127.0.0.1:-1",
                          "[::1]", "[::1]5", "[::1"}) {
    SCOPED_TRACE(bad);
    auto err = test::catchError([&] { SockAddr::parse(bad); });
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->code(), hetcclInvalidArgument) << err->what();
  }
  EXPECT_EQ(SockAddr::local().port(), 0);
}

// ---- sockets ----

std::pair<Socket, Socket> socketPair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  return {Socket(fds[0]), Socket(fds[1])};
}

TEST(Socket, SendRecvOverLoopbackBothWays) {
  Socket l = Socket::listen(SockAddr::parse("127.0.0.1:0"));
  SockAddr at = l.boundAddr();
  EXPECT_NE(at.port(), 0);
  const size_t n = 8 << 20;  // far more than the socket buffers
  std::vector<uint8_t> out(n), back(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  std::thread server([&] {
    Socket s;
    for (int i = 0; i < 50 && !s.valid(); ++i) s = l.accept(100);
    ASSERT_TRUE(s.valid());
    std::vector<uint8_t> buf(n);
    s.recvAll(buf.data(), n, Deadline::in(30), "server");
    s.sendAll(buf.data(), n, Deadline::in(30), "server");
  });
  Socket c = Socket::connect(at, Deadline::in(10), "test server");
  std::thread sender([&] { c.sendAll(out.data(), n, Deadline::in(30), "client"); });
  c.recvAll(back.data(), n, Deadline::in(30), "client");
  sender.join();
  server.join();
  EXPECT_EQ(back, out);
  EXPECT_FALSE(l.accept(10).valid()) << "no second connection is pending";
}

TEST(Socket, RecvTimesOutAtTheDeadline) {
  auto [a, b] = socketPair();
  char buf[4];
  auto t0 = Clock::now();
  EXPECT_HETCCL_ERROR(a.recvAll(buf, 4, Deadline::in(0.3), "peer X"), hetcclRemoteError, "peer X: timed out");
  EXPECT_GE(since(t0), 0.29);
  EXPECT_LT(since(t0), 2.0);
}

TEST(Socket, SendTimesOutWhenThePeerDoesNotRead) {
  auto [a, b] = socketPair();
  std::vector<char> big(64 << 20);
  EXPECT_HETCCL_ERROR(a.sendAll(big.data(), big.size(), Deadline::in(0.3), "peer Y"), hetcclRemoteError,
                      "peer Y: timed out");
}

TEST(Socket, AbortFlagEndsAWaitWithinASlice) {
  auto [a, b] = socketPair();
  std::atomic<bool> abort{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abort = true;
  });
  char buf[4];
  auto t0 = Clock::now();
  EXPECT_HETCCL_ERROR(a.recvAll(buf, 4, Deadline::in(30, &abort), "peer Z"), hetcclRemoteError, "aborted");
  EXPECT_LT(since(t0), 1.2);
  t.join();
  EXPECT_HETCCL_ERROR(Socket::connect(SockAddr::parse("127.0.0.1:1"), Deadline::in(30, &abort), "root"),
                      hetcclRemoteError, "aborted");
}

TEST(Socket, ClosedPeerIsARemoteErrorAtOnce) {
  auto [a, b] = socketPair();
  b.close();
  char buf[4] = {};
  auto t0 = Clock::now();
  EXPECT_HETCCL_ERROR(a.recvAll(buf, 4, Deadline::in(30), "peer W"), hetcclRemoteError, "closed");
  EXPECT_HETCCL_ERROR(a.sendAll(buf, 4, Deadline::in(30), "peer W"), hetcclRemoteError, "peer W");
  EXPECT_LT(since(t0), 1.0);
}

TEST(Socket, ConnectRetriesUntilTheDeadline) {
  Socket l = Socket::listen(SockAddr::parse("127.0.0.1:0"));
  SockAddr at = l.boundAddr();
  l.close();  // nobody listens there now
  auto t0 = Clock::now();
  EXPECT_HETCCL_ERROR(Socket::connect(at, Deadline::in(0.5), "nobody"), hetcclRemoteError, "nobody");
  EXPECT_GE(since(t0), 0.45);
}

// ---- handshake ----

struct HandshakeResult {
  std::optional<Error> client, server;
  PeerHello hello;
};

HandshakeResult handshake(const Secret& serverSecret, const Secret& clientSecret, uint64_t serverJob, PeerHello me,
                          Service service) {
  Socket l = Socket::listen(SockAddr::parse("127.0.0.1:0"));
  HandshakeResult r;
  std::thread server([&] {
    Socket s;
    for (int i = 0; i < 50 && !s.valid(); ++i) s = l.accept(100);
    r.server =
        test::catchError([&] { r.hello = serverHandshake(s, serverSecret, serverJob, service, Deadline::in(5)); });
  });  // the server's socket closes when it leaves, as a real server drops a client
  Socket c = Socket::connect(l.boundAddr(), Deadline::in(5), "server");
  r.client = test::catchError([&] { clientHandshake(c, clientSecret, me, Deadline::in(5), "test server"); });
  c.close();
  server.join();
  return r;
}

class Handshake : public ::testing::Test {
 protected:
  void SetUp() override { randomBytes(secret.data(), secret.size()); }
  Secret secret;
  PeerHello me{77, 3, 8, static_cast<uint32_t>(Service::kRing), 0};
};

TEST_F(Handshake, GoodSecretSucceedsAndDeliversTheHello) {
  auto r = handshake(secret, secret, 77, me, Service::kRing);
  EXPECT_FALSE(r.client.has_value()) << r.client->what();
  EXPECT_FALSE(r.server.has_value()) << r.server->what();
  EXPECT_EQ(r.hello.rank, 3);
  EXPECT_EQ(r.hello.nranks, 8);
  EXPECT_EQ(r.hello.jobId, 77u);
}

TEST_F(Handshake, WrongSecretFailsOnBothSides) {
  Secret other = secret;
  other[31] ^= 0x80;
  auto r = handshake(secret, other, 77, me, Service::kRing);
  ASSERT_TRUE(r.server.has_value());
  EXPECT_EQ(r.server->code(), hetcclRemoteError);
  EXPECT_TRUE(test::contains(r.server->what(), "secret")) << r.server->what();
  ASSERT_TRUE(r.client.has_value());
  EXPECT_EQ(r.client->code(), hetcclRemoteError);
  EXPECT_TRUE(test::contains(r.client->what(), "test server")) << r.client->what();
}

TEST_F(Handshake, WrongServiceFails) {
  auto r = handshake(secret, secret, 77, me, Service::kRoot);
  ASSERT_TRUE(r.client.has_value());
  EXPECT_EQ(r.client->code(), hetcclRemoteError);
  EXPECT_TRUE(test::contains(r.client->what(), "another kind")) << r.client->what();
  EXPECT_TRUE(r.server.has_value()) << "the server must not accept the client";
}

TEST_F(Handshake, WrongJobFailsOnBothSides) {
  auto r = handshake(secret, secret, 78, me, Service::kRing);
  ASSERT_TRUE(r.server.has_value());
  EXPECT_TRUE(test::contains(r.server->what(), "another communicator")) << r.server->what();
  EXPECT_TRUE(r.client.has_value());
}

// ---- rendezvous and the bootstrap ring ----

std::vector<uint8_t> recordOf(int rank, size_t bytes = 24) {
  std::vector<uint8_t> r(bytes);
  for (size_t i = 0; i < bytes; ++i) r[i] = static_cast<uint8_t>(rank * 31 + i);
  return r;
}

TEST(Bootstrap, RanksAsThreadsShareRecordsAllGatherAndBarrier) {
  for (int n : {1, 2, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    IdContents id = test::newJob();
    test::expectAllOk(test::runRanks(n, [&](int r) {
      Bootstrap b(id, r, n, recordOf(r), 30, nullptr);
      EXPECT_EQ(b.rank(), r);
      EXPECT_EQ(b.nranks(), n);
      ASSERT_EQ(b.records().size(), static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) EXPECT_EQ(b.records()[q], recordOf(q));
      for (size_t bytes : {size_t{1}, size_t{8}, size_t{4099}}) {
        std::vector<uint8_t> data(n * bytes, 0);
        for (size_t i = 0; i < bytes; ++i) data[r * bytes + i] = static_cast<uint8_t>(r + 1 + i);
        b.allGather(data.data(), bytes);
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < bytes; ++i)
            ASSERT_EQ(data[q * bytes + i], static_cast<uint8_t>(q + 1 + i)) << "block " << q << " byte " << i;
      }
      for (int i = 0; i < 3; ++i) b.barrier();
    }));
  }
}

TEST(Bootstrap, AbortWhileWaitingForMissingRanks) {
  IdContents id = test::newJob(5);
  std::atomic<bool> abort{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    abort = true;
  });
  auto t0 = Clock::now();
  EXPECT_HETCCL_ERROR(Bootstrap(id, 0, 2, recordOf(0), 30, &abort), hetcclRemoteError, "aborted");
  EXPECT_LT(since(t0), 1.5);
  t.join();
}

TEST(Bootstrap, WrongSecretIsRefused) {
  IdContents id = test::newJob(5);
  IdContents bad = id;
  bad.secret[0] ^= 1;
  EXPECT_HETCCL_ERROR(Bootstrap(bad, 0, 1, recordOf(0), 3, nullptr), hetcclRemoteError, "rendezvous root");
}

using Table = std::vector<std::vector<uint8_t>>;

TEST(Rendezvous, RefusesADuplicateRank) {
  IdContents id = test::newJob(20);
  auto join = [&](int rank, int n) {
    return std::async(std::launch::async, [=] { return rendezvous(id, rank, n, recordOf(rank), Deadline::in(20)); });
  };
  auto first = join(0, 2), second = join(0, 2);
  // Exactly one of the two rank-0s is refused; the other waits for rank 1.
  std::future<Table>* refused = nullptr;
  while (!refused) {
    if (first.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready)
      refused = &first;
    else if (second.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready)
      refused = &second;
  }
  EXPECT_HETCCL_ERROR(refused->get(), hetcclInvalidUsage, "joined twice");
  Table t1 = join(1, 2).get();
  Table t0 = (refused == &first ? second : first).get();
  EXPECT_EQ(t0, t1);
  EXPECT_EQ(t0, (Table{recordOf(0), recordOf(1)}));
}

TEST(Rendezvous, RefusesInconsistentNranksAndBadRanks) {
  IdContents id = test::newJob(20);
  auto join = [&](int rank, int n, size_t bytes = 24) {
    return std::async(std::launch::async,
                      [=] { return rendezvous(id, rank, n, recordOf(rank, bytes), Deadline::in(20)); });
  };
  // Whichever arrives first fixes nranks; the other is refused naming both.
  std::future<Table> three = join(0, 3), four = join(1, 4);
  std::future<Table>* refused = nullptr;
  while (!refused) {
    if (three.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready)
      refused = &three;
    else if (four.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready)
      refused = &four;
  }
  const bool fixedThree = refused == &four;
  const int n = fixedThree ? 3 : 4, waiting = fixedThree ? 0 : 1;
  EXPECT_HETCCL_ERROR(refused->get(), hetcclInvalidUsage, fixedThree ? "nranks=4" : "nranks=3");
  EXPECT_HETCCL_ERROR(join(n, n).get(), hetcclInvalidUsage, "out of range");
  EXPECT_HETCCL_ERROR(join(2, n, 25).get(), hetcclInvalidUsage, "record size");
  EXPECT_HETCCL_ERROR(join(2, n, kMaxRecordBytes + 1).get(), hetcclInvalidUsage, "record size 65537");
  std::vector<std::future<Table>> rest;
  for (int r = 0; r < n; ++r)
    if (r != waiting) rest.push_back(join(r, n));
  Table want;
  for (int r = 0; r < n; ++r) want.push_back(recordOf(r));
  EXPECT_EQ((waiting == 0 ? three : four).get(), want);
  for (auto& f : rest) EXPECT_EQ(f.get(), want);
}

// ---- launcher detection ----

TEST(Launcher, TorchrunVariables) {
  test::EnvGuard r("RANK", "2"), w("WORLD_SIZE", "4"), l("LOCAL_RANK", "0"), a("MASTER_ADDR", "127.0.0.1"),
      p("MASTER_PORT", "29500"), c("HETCCL_COMM_ID", nullptr), s("HETCCL_JOB_SECRET", "s3cret");
  LaunchInfo li = detectLauncher();
  EXPECT_EQ(li.launcher, "torchrun");
  EXPECT_EQ(li.rank, 2);
  EXPECT_EQ(li.nranks, 4);
  EXPECT_EQ(li.localRank, 0);
  EXPECT_EQ(li.root.str(), "127.0.0.1:29501");
  EXPECT_FALSE(li.weakSecret);
  LaunchInfo again = detectLauncher();
  EXPECT_EQ(again.secret, li.secret);
  EXPECT_EQ(again.jobId, li.jobId);
  test::EnvGuard s2("HETCCL_JOB_SECRET", "other");
  EXPECT_NE(detectLauncher().secret, li.secret);
  test::EnvGuard bad("RANK", "4");
  EXPECT_HETCCL_ERROR(detectLauncher(), hetcclInvalidArgument, "out of range");
}

TEST(Launcher, NoLauncherNamesTheVariables) {
  test::EnvGuard a("RANK", nullptr), b("OMPI_COMM_WORLD_RANK", nullptr), c("SLURM_PROCID", nullptr);
  EXPECT_HETCCL_ERROR(detectLauncher(), hetcclInvalidUsage, "RANK/WORLD_SIZE");
}

}  // namespace
}  // namespace hetccl
