// backend/: the built-in HostBackend, ranks as threads of this process (each
// with its own Bootstrap and transport), over shm and tcp; the registry.
// The NCCL-ABI backend is tested in test_nccl.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "device/device.h"
#include "transport/transport.h"
#include "unit_util.h"

namespace hetccl {
namespace {

struct Rank {
  int rank;       // global
  int groupRank;  // in its group
  int groupSize;
  Backend* be;
  Bootstrap* boot;
  MsgTag* tag;  // the backend's call tag: set alike on every rank before each call
  void next(CollKind k) {
    ++tag->seq;
    tag->coll = static_cast<uint16_t>(k);
  }
};

// groups: the ranks of each group (default: one group of all n ranks).
// "shm_ring": shm with single-copy (CMA) reads off.
void withBackends(std::string transport, int n, const std::function<void(Rank&)>& fn,
                  std::vector<std::vector<int>> groups = {}) {
  std::optional<test::EnvGuard> cma;
  if (transport == "shm_ring") transport = "shm", cma.emplace("HETCCL_SHM_CMA", "0");
  if (groups.empty()) {
    groups.emplace_back();
    for (int r = 0; r < n; ++r) groups[0].push_back(r);
  }
  IdContents id = test::newJob();
  test::expectAllOk(test::runRanks(n, [&](int r) {
    Bootstrap b(id, r, n, {static_cast<uint8_t>(r)}, 60, nullptr);
    TransportContext tc;
    tc.rank = r;
    tc.nranks = n;
    for (int p = 0; p < n; ++p)
      if (p != r) tc.peers.push_back(p);
    tc.bootstrap = &b;
    tc.timeoutS = 20;
    tc.buffBytes = 256 << 10;
    auto t = createTransport(transport, tc);
    auto dev = createDeviceRuntime("host");
    MsgTag tag;
    BackendContext bc;
    for (const auto& g : groups)
      for (size_t i = 0; i < g.size(); ++i)
        if (g[i] == r) bc.ranks = g, bc.groupRank = static_cast<int>(i);
    bc.bootstrap = &b;
    bc.transport = t.get();
    bc.device = dev.get();
    bc.callTag = &tag;
    auto be = createBackend("host", bc);
    EXPECT_STREQ(be->name(), "host");
    EXPECT_EQ(be->nranks(), static_cast<int>(bc.ranks.size()));
    EXPECT_EQ(be->rank(), bc.groupRank);
    Rank me{r, bc.groupRank, static_cast<int>(bc.ranks.size()), be.get(), &b, &tag};
    fn(me);
    b.barrier();
  }));
}

int32_t val(int rank, size_t i) { return static_cast<int32_t>((i * 7 + rank * 13) % 19) - 9; }

int32_t refReduce(int k, size_t i, RedKind op, const std::vector<int>& ranks) {
  int32_t acc = val(ranks[0], i);
  for (int j = 1; j < k; ++j) {
    int32_t v = val(ranks[j], i);
    switch (op) {
      case RedKind::kSum: acc += v; break;
      case RedKind::kProd: acc *= v; break;
      case RedKind::kMax: acc = std::max(acc, v); break;
      case RedKind::kMin: acc = std::min(acc, v); break;
    }
  }
  return acc;
}

uint64_t digest(const void* p, size_t bytes) {
  const uint8_t key[16] = {1};
  return sipHash24(key, p, bytes);
}

class HostBackendTest : public ::testing::TestWithParam<std::string> {};

// Small (one exchange) and large (reduce-scatter + allgather) paths, counts
// below the group size, in and out of place, every op.
TEST_P(HostBackendTest, AllReduceEveryOpAndPath) {
  const int n = 3;
  withBackends(GetParam(), n, [&](Rank& me) {
    std::vector<int> all = {0, 1, 2};
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{1000}, size_t{100003}}) {
      for (RedKind op : {RedKind::kSum, RedKind::kProd, RedKind::kMax, RedKind::kMin}) {
        for (bool inPlace : {false, true}) {
          std::vector<int32_t> in(count), out(count, -77);
          for (size_t i = 0; i < count; ++i) in[i] = val(me.rank, i);
          me.next(CollKind::kAllReduce);
          me.be->allReduce(in.data(), inPlace ? in.data() : out.data(), count, hetcclInt32, op, nullptr);
          const auto& res = inPlace ? in : out;
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(res[i], refReduce(n, i, op, all))
                << "count " << count << " op " << redKindName(op) << (inPlace ? " in place" : "") << " at " << i;
        }
      }
    }
  });
}

// Floats: every rank ends with the same bits, on both paths.
TEST_P(HostBackendTest, AllReduceFloatsBitIdenticalOnEveryRank) {
  const int n = 4;
  withBackends(GetParam(), n, [&](Rank& me) {
    for (size_t count : {size_t{1000}, size_t{200003}}) {
      std::mt19937 rng(me.rank * 100 + 1);
      std::uniform_real_distribution<float> u(-1, 1);
      std::vector<float> buf(count);
      double want = 0;
      for (auto& v : buf) v = u(rng);
      me.next(CollKind::kAllReduce);
      me.be->allReduce(buf.data(), buf.data(), count, hetcclFloat32, RedKind::kSum, nullptr);
      for (int r = 0; r < n; ++r) {  // element 0 against a double-precision sum
        std::mt19937 g(r * 100 + 1);
        want += u(g);
      }
      EXPECT_NEAR(buf[0], want, 1e-5);
      std::vector<uint64_t> d(n);
      d[me.rank] = digest(buf.data(), count * 4);
      me.boot->allGather(d.data(), sizeof(uint64_t));
      for (int r = 0; r < n; ++r) EXPECT_EQ(d[r], d[0]) << "rank " << r << " differs, count " << count;
    }
  });
}

TEST_P(HostBackendTest, ReduceScatterAndAllGatherInAndOutOfPlace) {
  const int n = 3;
  const size_t rc = 1001;
  withBackends(GetParam(), n, [&](Rank& me) {
    std::vector<int> all = {0, 1, 2};
    for (bool inPlace : {false, true}) {
      std::vector<int32_t> send(n * rc), recv(rc, -1);
      for (size_t i = 0; i < send.size(); ++i) send[i] = val(me.rank, i);
      int32_t* out = inPlace ? send.data() + me.groupRank * rc : recv.data();
      me.next(CollKind::kReduceScatter);
      me.be->reduceScatter(send.data(), out, rc, hetcclInt32, RedKind::kSum, nullptr);
      for (size_t i = 0; i < rc; ++i) ASSERT_EQ(out[i], refReduce(n, me.groupRank * rc + i, RedKind::kSum, all)) << i;
    }
    for (bool inPlace : {false, true}) {
      const size_t sc = 777;
      std::vector<int64_t> mine(sc), all64(n * sc, -1);
      for (size_t i = 0; i < sc; ++i) mine[i] = (int64_t{me.rank} << 40) + i;
      if (inPlace) memcpy(all64.data() + me.groupRank * sc, mine.data(), sc * 8);
      me.next(CollKind::kAllGather);
      me.be->allGather(inPlace ? all64.data() + me.groupRank * sc : mine.data(), all64.data(), sc, hetcclInt64,
                       nullptr);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < sc; ++i) ASSERT_EQ(all64[r * sc + i], (int64_t{r} << 40) + static_cast<int64_t>(i));
    }
  });
}

TEST_P(HostBackendTest, BroadcastAndReduceFromEveryRoot) {
  const int n = 3;
  withBackends(GetParam(), n, [&](Rank& me) {
    const size_t bytes = (1 << 20) + 5;
    for (int root = 0; root < n; ++root) {
      std::vector<uint8_t> src(bytes), dst(bytes, 0);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 3 + root);
      me.next(CollKind::kBroadcast);
      if (me.groupRank == root)
        me.be->broadcast(src.data(), dst.data(), bytes, hetcclUint8, root, nullptr);
      else
        me.be->broadcast(dst.data(), dst.data(), bytes, hetcclUint8, root, nullptr);
      ASSERT_EQ(dst, src) << "root " << root;
    }
    std::vector<int> all = {0, 1, 2};
    for (int root = 0; root < n; ++root) {
      for (RedKind op : {RedKind::kSum, RedKind::kMax}) {
        const size_t count = 5000;
        std::vector<int32_t> in(count), out(count, -99);
        for (size_t i = 0; i < count; ++i) in[i] = val(me.rank, i);
        me.next(CollKind::kReduce);
        me.be->reduce(in.data(), out.data(), count, hetcclInt32, op, root, nullptr);
        if (me.groupRank != root) continue;
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], refReduce(n, i, op, all)) << "root " << root;
      }
    }
  });
}

// Point-to-point in one group call: every rank receives from everyone before
// it sends (larger than any buffer), which only works if they are issued together.
TEST_P(HostBackendTest, SendRecvInsideAGroupAnyOrder) {
  const int n = 4;
  withBackends(GetParam(), n, [&](Rank& me) {
    const size_t bytes = (2 << 20) + 1;
    std::vector<std::vector<uint8_t>> out(n), in(n);
    me.next(CollKind::kSendRecv);
    me.be->groupStart();
    for (int p = 0; p < n; ++p) {
      if (p == me.rank) continue;
      in[p].assign(bytes, 0);
      me.be->recv(in[p].data(), bytes, hetcclUint8, p, nullptr);
    }
    me.be->groupStart();  // nested groups issue at the outermost end
    for (int p = n - 1; p >= 0; --p) {
      if (p == me.rank) continue;
      out[p].resize(bytes);
      for (size_t i = 0; i < bytes; ++i) out[p][i] = static_cast<uint8_t>(me.rank * 16 + p + i);
      me.be->send(out[p].data(), bytes, hetcclUint8, p, nullptr);
    }
    me.be->groupEnd();
    me.be->groupEnd();
    for (int p = 0; p < n; ++p) {
      if (p == me.rank) continue;
      for (size_t i = 0; i < bytes; i += 4099)
        ASSERT_EQ(in[p][i], static_cast<uint8_t>(p * 16 + me.rank + i)) << "from " << p;
    }
    // Outside a group each call completes on its own: pair up in matching order.
    const int partner = me.rank ^ 1;
    std::vector<int32_t> s(3000, me.rank), r(3000, -1);
    me.next(CollKind::kSendRecv);
    if (me.rank % 2 == 0) {
      me.be->send(s.data(), 3000, hetcclInt32, partner, nullptr);
      me.be->recv(r.data(), 3000, hetcclInt32, partner, nullptr);
    } else {
      me.be->recv(r.data(), 3000, hetcclInt32, partner, nullptr);
      me.be->send(s.data(), 3000, hetcclInt32, partner, nullptr);
    }
    EXPECT_EQ(r, std::vector<int32_t>(3000, partner));
  });
}

// Two groups with interleaved global ranks run at once over one transport:
// group ranks map to the right global ranks and never mix.
TEST_P(HostBackendTest, InterleavedSubgroupsStayApart) {
  const std::vector<std::vector<int>> groups = {{0, 2, 4}, {1, 3}};
  withBackends(
      GetParam(), 5,
      [&](Rank& me) {
        const auto& g = groups[me.rank % 2];
        for (size_t count : {size_t{10}, size_t{50001}}) {
          std::vector<int32_t> buf(count);
          for (size_t i = 0; i < count; ++i) buf[i] = val(me.rank, i);
          me.next(CollKind::kAllReduce);
          me.be->allReduce(buf.data(), buf.data(), count, hetcclInt32, RedKind::kSum, nullptr);
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(buf[i], refReduce(static_cast<int>(g.size()), i, RedKind::kSum, g)) << "rank " << me.rank;
        }
        std::vector<int32_t> all(g.size() * 4, -1), mine(4, me.rank);
        me.next(CollKind::kAllGather);
        me.be->allGather(mine.data(), all.data(), 4, hetcclInt32, nullptr);
        for (size_t j = 0; j < g.size(); ++j) EXPECT_EQ(all[j * 4 + 3], g[j]);
      },
      groups);
}

INSTANTIATE_TEST_SUITE_P(Transports, HostBackendTest, ::testing::Values("shm", "shm_ring", "tcp"),
                         [](const auto& i) { return i.param; });

TEST(Backend, UnknownBackendNamesTheKnownOnes) {
  BackendContext bc;
  EXPECT_HETCCL_ERROR(createBackend("nosuch", bc), hetcclInvalidArgument, "known: host, nccl, rccl");
  EXPECT_EQ(defaultBackendFor("cuda"), "nccl");
  EXPECT_EQ(defaultBackendFor("hip"), "rccl");
  EXPECT_EQ(defaultBackendFor("host"), "host");
}

// --- NCCL-ABI backend: loading ---

}  // namespace
}  // namespace hetccl
