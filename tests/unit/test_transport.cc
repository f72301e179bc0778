// transport/: TcpTransport and ShmTransport with ranks as threads of this
// process, each with its own Bootstrap (tcp also with encrypted links): batches of every size and pairing
// order, receive-and-reduce, tag checks, abort, timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "elements/lowp.h"
#include "bootstrap/bootstrap.h"
#include "transport/net/net_plugin.h"
#include "transport/routed.h"
#include "transport/transport.h"
#if HETCCL_HAVE_OFI
#include <rdma/fi_domain.h>

#include "transport/ofi/ofi_api.h"
#include "transport/ofi/ofi_mr_cache.h"
#endif
#include "unit_util.h"

namespace hetccl {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Rank {
  int rank;
  std::unique_ptr<Transport> t;
  Bootstrap* boot;
  std::atomic<bool>* abort;
};

struct Opts {
  double timeoutS = 20;
  size_t buffBytes = 256 << 10;  // small: big messages wrap the staging buffer / ring many times
};

// Builds `name` on n thread-ranks and runs fn on each; a final bootstrap
// barrier keeps every transport alive until all ranks are done.
// "shm_ring" is shm with single-copy (CMA) reads off: every byte through the rings.
void withTransports(std::string name, int n, const std::function<void(Rank&)>& fn, Opts o = {},
                    std::vector<std::atomic<bool>>* aborts = nullptr) {
  std::optional<test::EnvGuard> cma;
  if (name == "shm_ring") name = "shm", cma.emplace("HETCCL_SHM_CMA", "0");
  // "tcp_secure": tcp with every link encrypted, and a new key every 3 records.
  const bool secure = name == "tcp_secure";
  if (secure) name = "tcp";
  IdContents id = test::newJob();
  std::vector<std::atomic<bool>> own(n);
  if (!aborts) aborts = &own;
  test::expectAllOk(test::runRanks(n, [&](int r) {
    Bootstrap b(id, r, n, {static_cast<uint8_t>(r)}, 60, nullptr);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    for (int p = 0; p < n; ++p)
      if (p != r) ctx.peers.push_back(p);
    ctx.bootstrap = &b;
    ctx.abort = &(*aborts)[r];
    ctx.timeoutS = o.timeoutS;
    ctx.buffBytes = o.buffBytes;
    if (secure) ctx.encrypt.assign(n, 1), ctx.rekeyRecords = 3;
    Rank me{r, createTransport(name, ctx), &b, &(*aborts)[r]};
    EXPECT_EQ(std::string(me.t->name()), name);
    fn(me);
    b.barrier();
  }));
}

MsgTag tagOf(uint64_t seq, CollKind k = CollKind::kSendRecv, uint64_t count = 0) {
  MsgTag t;
  t.seq = seq;
  t.coll = static_cast<uint16_t>(k);
  t.count = count;
  return t;
}

uint8_t pattern(int from, int to, size_t size, size_t i) {
  return static_cast<uint8_t>(from * 37 + to * 11 + size * 3 + i * 7 + (i >> 9));
}

class Transports : public ::testing::TestWithParam<std::string> {};

// Every rank sends messages of many sizes to every other rank in one batch,
// each rank listing its transfers in another order.
TEST_P(Transports, AllPairsManySizesAnyOrder) {
  const int n = 4;
  const std::vector<size_t> sizes = {0, 1, 7, 4096, (64 << 10) + 3, 0, (5 << 20) + 3};
  withTransports(GetParam(), n, [&](Rank& me) {
    const int r = me.rank;
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<Xfer> sends, recvs;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (size_t s : sizes) {
        out.emplace_back(s);
        for (size_t i = 0; i < s; ++i) out.back()[i] = pattern(r, p, s, i);
        in.emplace_back(s, 0xee);
      }
    }
    size_t k = 0;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (size_t s : sizes) {
        sends.push_back(Xfer::send(p, out[k].data(), s, tagOf(1)));
        recvs.push_back(Xfer::recv(p, in[k].data(), s, tagOf(1)));
        ++k;
      }
    }
    std::vector<Xfer> batch;
    switch (r) {
      case 0: batch = recvs, batch.insert(batch.end(), sends.begin(), sends.end()); break;  // receives first
      case 1: batch = sends, batch.insert(batch.end(), recvs.begin(), recvs.end()); break;  // sends first
      default:  // interleaved, peers in reverse order (per-peer order kept)
        for (int j = static_cast<int>(sends.size()) - 1; j >= 0; --j) {
          size_t perPeer = sizes.size(), peerIdx = j / perPeer, base = peerIdx * perPeer;
          size_t idx = base + (perPeer - 1 - j % perPeer);
          batch.push_back(recvs[idx]);
          batch.push_back(sends[idx]);
        }
    }
    me.t->run(batch);
    k = 0;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      for (size_t s : sizes) {
        for (size_t i = 0; i < s; ++i)
          ASSERT_EQ(in[k][i], pattern(p, r, s, i)) << "from " << p << " size " << s << " byte " << i;
        ++k;
      }
    }
    // The transport is reusable: a second batch, in separate calls per direction.
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<int> a(1000, r), b(1000, -1);
    std::vector<Xfer> s1{Xfer::send(next, a.data(), 4000, tagOf(2))}, r1{Xfer::recv(prev, b.data(), 4000, tagOf(2))};
    if (r % 2)
      me.t->run(s1), me.t->run(r1);
    else
      me.t->run(r1), me.t->run(s1);
    EXPECT_EQ(b, std::vector<int>(1000, prev));
  });
}

template <class T>
std::vector<T> values(size_t n, int seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int>((i * 13 + seed * 7) % 61) - 30);
  return v;
}

// Receive-and-reduce: several types and sizes (the large ones split elements
// across reads and slots), each rank folding every other rank's data.
TEST_P(Transports, RecvReduceManyTypesAndSizes) {
  const int n = 3;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{(5 << 20) / 8 + 1}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    withTransports(GetParam(), n, [&](Rank& me) {
      const int r = me.rank;
      auto i32 = values<int32_t>(count, r);
      auto f32 = values<float>(count, r);
      auto f64 = values<double>(count, r);
      auto i64 = values<int64_t>(count, r);
      const auto mine = values<int>(count, r);
      std::vector<uint16_t> h(count);
      for (size_t i = 0; i < count; ++i) h[i] = floatToHalf(static_cast<float>(mine[i]));
      // acc[t * (n - 1) + q]: type t received from the q-th other rank.
      std::vector<std::vector<uint8_t>> acc;
      std::vector<Xfer> x;
      auto add = [&](const void* src, size_t es, DataType dt, RedKind k) {
        for (int p = 0; p < n; ++p) {
          if (p == r) continue;
          x.push_back(Xfer::send(p, src, count * es, tagOf(3)));
          acc.emplace_back(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + count * es);
          x.push_back(Xfer::recvReduce(p, acc.back().data(), count * es, dt, k, tagOf(3)));
        }
      };
      acc.reserve(5 * (n - 1));  // no reallocation: the transfers point into acc
      add(i32.data(), 4, hetcclInt32, RedKind::kSum);
      add(f32.data(), 4, hetcclFloat32, RedKind::kMax);
      add(f64.data(), 8, hetcclFloat64, RedKind::kProd);
      add(i64.data(), 8, hetcclInt64, RedKind::kMin);
      add(h.data(), 2, hetcclFloat16, RedKind::kSum);
      me.t->run(x);
      const size_t k = n - 1;
      size_t q = 0;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        auto pi32 = values<int32_t>(count, p);
        auto pf = values<float>(count, p);
        auto pd = values<double>(count, p);
        auto pl = values<int64_t>(count, p);
        auto pi = values<int>(count, p);
        for (size_t i = 0; i < count; ++i) {
          int32_t a;
          float f;
          double d;
          int64_t l;
          uint16_t hh;
          memcpy(&a, &acc[q][i * 4], 4);
          memcpy(&f, &acc[q + k][i * 4], 4);
          memcpy(&d, &acc[q + 2 * k][i * 8], 8);
          memcpy(&l, &acc[q + 3 * k][i * 8], 8);
          memcpy(&hh, &acc[q + 4 * k][i * 2], 2);
          ASSERT_EQ(a, i32[i] + pi32[i]) << "int32 sum from " << p << " at " << i;
          ASSERT_EQ(f, std::max(f32[i], pf[i])) << "float max from " << p << " at " << i;
          ASSERT_EQ(d, f64[i] * pd[i]) << "double prod from " << p << " at " << i;
          ASSERT_EQ(l, std::min(i64[i], pl[i])) << "int64 min from " << p << " at " << i;
          ASSERT_EQ(halfToFloat(hh), static_cast<float>(mine[i] + pi[i])) << "half sum from " << p << " at " << i;
        }
        ++q;
      }
    });
  }
}

TEST_P(Transports, TagMismatchNamesBothCalls) {
  MsgTag sent = tagOf(5, CollKind::kAllReduce, 100), expected = tagOf(5, CollKind::kBroadcast, 100);
  sent.dtype = expected.dtype = hetcclFloat32;
  expected.root = 0;
  withTransports(GetParam(), 2, [&](Rank& me) {
    std::vector<float> buf(100, 1.0f);
    if (me.rank == 0) {
      std::vector<Xfer> x{Xfer::send(1, buf.data(), 400, sent)};
      me.t->run(x);
      return;
    }
    std::vector<Xfer> x{Xfer::recv(0, buf.data(), 400, expected)};
    auto err = test::catchError([&] { me.t->run(x); });
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->code(), hetcclInvalidUsage);
    EXPECT_TRUE(test::contains(err->what(), sent.describe())) << err->what();
    EXPECT_TRUE(test::contains(err->what(), expected.describe())) << err->what();
    EXPECT_TRUE(test::contains(err->what(), "rank 0")) << err->what();
  });
}

TEST_P(Transports, SizeMismatchInOneCallIsInvalidUsage) {
  withTransports(GetParam(), 2, [&](Rank& me) {
    std::vector<uint8_t> buf(80);
    if (me.rank == 0) {
      std::vector<Xfer> x{Xfer::send(1, buf.data(), 40, tagOf(6))};
      me.t->run(x);
      return;
    }
    std::vector<Xfer> x{Xfer::recv(0, buf.data(), 80, tagOf(6))};
    EXPECT_HETCCL_ERROR(me.t->run(x), hetcclInvalidUsage, "expected 80 bytes from rank 0");
  });
}

TEST_P(Transports, AbortReleasesABlockedRunWithinASecond) {
  std::vector<std::atomic<bool>> aborts(2);
  std::atomic<bool> flagged{false};
  Clock::time_point setAt;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // after setup; rank 1 is waiting
    setAt = Clock::now();
    flagged = true;
    aborts[1] = true;
  });
  withTransports(
      GetParam(), 2,
      [&](Rank& me) {
        if (me.rank == 0) {
          while (!flagged) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return;  // never sends
        }
        std::vector<uint8_t> buf(1000);
        std::vector<Xfer> x{Xfer::recv(0, buf.data(), buf.size(), tagOf(7))};
        EXPECT_HETCCL_ERROR(me.t->run(x), hetcclRemoteError, "aborted");
        EXPECT_TRUE(flagged.load()) << "run() returned before the abort";
        EXPECT_LT(since(setAt), 1.0);
      },
      Opts{}, &aborts);
  aborter.join();
}

TEST_P(Transports, SilentPeerTimesOutNamingThePeer) {
  Opts o;
  o.timeoutS = 1;
  withTransports(
      GetParam(), 3,
      [&](Rank& me) {
        if (me.rank == 0) return;  // silent
        std::vector<uint8_t> buf(64 << 20);
        std::vector<Xfer> x;
        // Rank 1 waits to receive; rank 2 sends more than any buffer holds.
        if (me.rank == 1)
          x.push_back(Xfer::recv(0, buf.data(), 1000, tagOf(8)));
        else
          x.push_back(Xfer::send(0, buf.data(), buf.size(), tagOf(8)));
        auto t0 = Clock::now();
        auto err = test::catchError([&] { me.t->run(x); });
        double took = since(t0);
        ASSERT_TRUE(err.has_value());
        EXPECT_EQ(err->code(), hetcclRemoteError);
        const char* what = me.rank == 1 ? "receiving from rank 0" : "sending to rank 0";
        EXPECT_TRUE(test::contains(err->what(), what)) << err->what();
        EXPECT_TRUE(test::contains(err->what(), "timed out")) << err->what();
        EXPECT_GE(took, 0.9);
        EXPECT_LT(took, 5.0);
      },
      o);
}

TEST_P(Transports, NoConnectionToARankOutsideThePeerList) {
  IdContents id = test::newJob();
  test::expectAllOk(test::runRanks(3, [&](int r) {
    Bootstrap b(id, r, 3, {1}, 30, nullptr);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = 3;
    if (r != 2) ctx.peers.push_back(1 - r);  // ranks 0 and 1 know each other; 2 nobody
    ctx.bootstrap = &b;
    ctx.timeoutS = 10;
    auto t = createTransport(GetParam().rfind("tcp", 0) == 0 ? "tcp" : "shm", ctx);
    uint8_t byte = 0;
    if (r == 0) {
      std::vector<Xfer> x{Xfer::send(2, &byte, 1, tagOf(9))};
      EXPECT_HETCCL_ERROR(t->run(x), hetcclInternalError, "rank 2");
    }
    b.barrier();
  }));
}

INSTANTIATE_TEST_SUITE_P(Kinds, Transports,
                         ::testing::Values("tcp", "tcp_secure", "shm", "shm_ring"
#if HETCCL_HAVE_UCX
                                           ,
                                           "ucx"
#endif
                                           ),
                         [](const auto& i) { return i.param; });

// A lazy single-copy send returns before the receiver has even posted its
// receive; drain() returns only once the receiver has read it (the sender
// then overwrites its buffer: the receiver must still get the original).
TEST(Transport, LazyShmSendReturnsAtOnceAndDrainWaitsForTheRead) {
  constexpr size_t kBytes = 4 << 20;  // above a slot: read from the sender's memory
  std::atomic<bool> sent{false};
  withTransports("shm", 2, [&](Rank& me) {
    std::vector<uint8_t> buf(kBytes);
    if (me.rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) buf[i] = pattern(0, 1, kBytes, i);
      std::vector<Xfer> x{Xfer::send(1, buf.data(), kBytes, tagOf(9))};
      x[0].lazy = true;
      me.t->run(x);
      sent = true;
      me.t->drain();
      std::memset(buf.data(), 0xEE, kBytes);
      return;
    }
    auto t0 = Clock::now();
    while (!sent && since(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(sent.load()) << "run() of a lazy send waited for the receiver";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 is inside drain() now
    std::vector<Xfer> x{Xfer::recv(0, buf.data(), kBytes, tagOf(9))};
    me.t->run(x);
    size_t bad = 0;
    for (size_t i = 0; i < kBytes; ++i) bad += buf[i] != pattern(0, 1, kBytes, i);
    EXPECT_EQ(bad, 0u) << "drain() returned before the receiver had read the data";
  });
}

TEST(Transport, ClosedTcpPeerFailsAtOnce) {
  withTransports("tcp", 2, [&](Rank& me) {
    if (me.rank == 0) {
      me.t.reset();  // closes the connection
      return;
    }
    std::vector<uint8_t> buf(1000);
    std::vector<Xfer> x{Xfer::recv(0, buf.data(), buf.size(), tagOf(10))};
    auto t0 = Clock::now();
    EXPECT_HETCCL_ERROR(me.t->run(x), hetcclRemoteError, "closed");
    EXPECT_LT(since(t0), 1.0);
  });
}

TEST(Transport, UnknownNameListsTheKnownOnes) {
  TransportContext ctx;
  auto err = test::catchError([&] { createTransport("udp", ctx); });
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->code(), hetcclInvalidArgument);
  for (const std::string& known : transportNames()) EXPECT_TRUE(test::contains(err->what(), known)) << err->what();
  EXPECT_TRUE(test::contains(err->what(), "udp"));
}

TEST(Transport, TagDescriptions) {
  MsgTag t = tagOf(12, CollKind::kAllReduce, 1000);
  t.dtype = hetcclFloat32;
  t.op = static_cast<uint8_t>(RedKind::kMax);
  EXPECT_EQ(t.describe(), "AllReduce #12 (count 1000, float, max)");
  MsgTag b = tagOf(3, CollKind::kBroadcast, 8);
  b.dtype = hetcclInt8;
  b.root = 2;
  EXPECT_EQ(b.describe(), "Broadcast #3 (count 8, int8, root 2)");
  MsgTag p = tagOf(4, CollKind::kSendRecv, 5);
  p.root = 1;
  EXPECT_TRUE(test::contains(p.describe(), "peer 1"));
  EXPECT_TRUE(t.sameCall(t));
  MsgTag u = t;
  u.bytes = 99;
  EXPECT_TRUE(t.sameCall(u)) << "bytes are per message, not per call";
  u.seq = 13;
  EXPECT_FALSE(t.sameCall(u));
  Xfer x = Xfer::recvReduce(3, nullptr, 64, hetcclInt64, RedKind::kMin, t);
  EXPECT_EQ(x.tag.bytes, 64u);
  EXPECT_EQ(x.kind, Xfer::Kind::kRecvReduce);
  EXPECT_EQ(x.peer, 3);
}

// HETCCL_TRANSPORT's forms: one name for every link, or per link class.
TEST(TransportChoice, ParsesEveryFormAndNamesWhatIsWrong) {
  TransportChoice c = parseTransportChoice("auto", "X");
  EXPECT_EQ(c.intra, "auto");
  EXPECT_EQ(c.inter, "auto");
  c = parseTransportChoice("tcp", "X");
  EXPECT_EQ(c.intra, "tcp");
  EXPECT_EQ(c.inter, "tcp");
  c = parseTransportChoice("INTRA=shm,inter=UCX", "X");
  EXPECT_EQ(c.intra, "shm");
  EXPECT_EQ(c.inter, "ucx");
  c = parseTransportChoice("inter=tcp", "X");
  EXPECT_EQ(c.intra, "auto");
  EXPECT_EQ(c.inter, "tcp");
  c = parseTransportChoice("inter=net", "X");
  EXPECT_EQ(c.intra, "auto");
  EXPECT_EQ(c.inter, "net");
  c = parseTransportChoice("intra=shm,inter=OFI", "X");
  EXPECT_EQ(c.inter, "ofi");
  c = parseTransportChoice("ofi", "X");
  EXPECT_EQ(c.intra, "ofi");
  for (const char* bad : {"", "rdma", "intra=shm,inter=shm", "intra=shm,,inter=tcp", "intra=shm,intra=tcp", "near=shm",
                          "intra", "intra=tcp,inter=tcp,"}) {
    try {
      parseTransportChoice(bad, "HETCCL_TRANSPORT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), hetcclInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("HETCCL_TRANSPORT='" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

// The file a HETCCL_NET_PLUGIN value names.
TEST(NetPlugin, FileForSetting) {
  EXPECT_EQ(NetPlugin::fileFor(""), "libnccl-net.so");
  EXPECT_EQ(NetPlugin::fileFor("ofi"), "libnccl-net-ofi.so");
  EXPECT_EQ(NetPlugin::fileFor("libnccl-net-gIB.so"), "libnccl-net-gIB.so");
  EXPECT_EQ(NetPlugin::fileFor("/opt/x/libnccl-net.so"), "/opt/x/libnccl-net.so");
  EXPECT_EQ(NetPlugin::fileFor("./plugin"), "./plugin");
}

}  // namespace
#if HETCCL_HAVE_OFI
// The providers HETCCL_TRANSPORT=auto does not count as a fabric for ofi:
// libfabric's emulations over sockets and shared memory, alone or under
// its ofi_rxm/ofi_rxd layers; hardware providers count, layered or not.
TEST(OfiProviders, SoftwareProvidersAreToldFromHardware) {
  for (const char* soft : {"tcp", "tcp;ofi_rxm", "sockets", "udp;ofi_rxd", "shm", "net", "ofi_rxm"})
    EXPECT_TRUE(ofi::softwareProvider(soft)) << soft;
  for (const char* hard : {"efa", "cxi", "verbs;ofi_rxm", "psm3", "opx", "verbs"})
    EXPECT_FALSE(ofi::softwareProvider(hard)) << hard;
}

// Registrations the cache makes and closes, without a provider: each is a
// region whose close counts itself.
struct FakeRegs {
  static inline int closed = 0;
  int made = 0;
  fi_ops ops{};
  FakeRegs() {
    closed = 0;
    ops.size = sizeof(ops);
    ops.close = [](fid* f) {
      ++closed;
      delete reinterpret_cast<fid_mr*>(f);
      return 0;
    };
  }
  ofi::MrCache::RegisterFn fn() {
    return [this](const void*, size_t) {
      ++made;
      auto* mr = new fid_mr{};
      mr->fid.ops = &ops;
      return mr;
    };
  }
};

// A range inside a registration reuses it; the least recently used goes
// when the cache is full, never one the current run used (its peer may be
// writing into it): a run of more receives grows the cache until its end;
// a cache that keeps nothing across runs empties at each run's end; a
// refused registration leaves nothing behind.
TEST(OfiMrCache, ReusesCoveringRangesAndEvictsTheLeastRecentlyUsed) {
  std::vector<uint8_t> a(4096), b(4096), c(4096);
  FakeRegs regs;
  {
    ofi::MrCache cache(2, true);
    const fid_mr* ma = cache.find(a.data(), a.size(), regs.fn()).mr;
    EXPECT_EQ(cache.find(a.data() + 100, 200, regs.fn()).mr, ma);  // inside a: no registration
    EXPECT_EQ(regs.made, 1);
    cache.find(b.data(), b.size(), regs.fn());
    cache.runEnded();
    cache.find(a.data(), a.size(), regs.fn());  // a used last: b goes first
    cache.runEnded();
    cache.find(c.data(), c.size(), regs.fn());
    EXPECT_EQ(regs.made, 3);
    EXPECT_EQ(FakeRegs::closed, 1);
    EXPECT_EQ(cache.find(a.data(), 16, regs.fn()).mr, ma);
    cache.runEnded();
    cache.find(b.data(), b.size(), regs.fn());  // b again: registered anew, in place of c
    EXPECT_EQ(regs.made, 4);
    EXPECT_EQ(FakeRegs::closed, 2);
    EXPECT_EQ(cache.find(a.data(), a.size() + 1, regs.fn()).begin, reinterpret_cast<uintptr_t>(a.data()));
    EXPECT_EQ(regs.made, 5);  // one byte past a's registration: a new one, in place of a's
    cache.runEnded();         // kept across runs
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(cache.registrations(), 5u);
    EXPECT_THROW(
        cache.find(c.data(), c.size(), [](const void*, size_t) -> fid_mr* { throw std::runtime_error("refused"); }),
        std::runtime_error);
    EXPECT_EQ(cache.registrations(), 5u);
    // One run of three receives into a cache of two: none closed while the
    // run goes on; at its end the least recently used goes.
    const int closedBefore = FakeRegs::closed;
    std::vector<uint8_t> d(4096), e(4096), f(4096);
    cache.runEnded();
    const fid_mr* md = cache.find(d.data(), d.size(), regs.fn()).mr;
    cache.find(e.data(), e.size(), regs.fn());
    EXPECT_EQ(FakeRegs::closed, closedBefore + 2);  // the two of earlier runs
    cache.find(f.data(), f.size(), regs.fn());
    EXPECT_EQ(FakeRegs::closed, closedBefore + 2) << "a registration of the current run was closed";
    EXPECT_EQ(cache.size(), 3u);
    EXPECT_EQ(cache.find(d.data(), 8, regs.fn()).mr, md);
    cache.runEnded();
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_EQ(FakeRegs::closed, closedBefore + 3);  // e, the least recently used
  }
  EXPECT_EQ(FakeRegs::closed, regs.made);  // every registration closed, the last at destruction
  ofi::MrCache perRun(8, false);
  perRun.find(a.data(), a.size(), regs.fn());
  perRun.find(b.data(), b.size(), regs.fn());
  perRun.runEnded();
  EXPECT_EQ(perRun.size(), 0u);
  EXPECT_EQ(FakeRegs::closed, regs.made);
}
#endif

}  // namespace hetccl
