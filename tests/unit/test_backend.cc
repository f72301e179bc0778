// backend/: the built-in HostBackend, ranks as threads of this process (each
// with its own Bootstrap and transport), over shm and tcp; the NCCL-ABI
// backend's loader (no GPU: no communicator is made) and its call mapping,
// over a table of fake library functions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/nccl/nccl_api.h"
#include "backend/nccl/nccl_backend.h"
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
      for (size_t i = 0; i < rc; ++i)
        ASSERT_EQ(out[i], refReduce(n, me.groupRank * rc + i, RedKind::kSum, all)) << i;
    }
    for (bool inPlace : {false, true}) {
      const size_t sc = 777;
      std::vector<int64_t> mine(sc), all64(n * sc, -1);
      for (size_t i = 0; i < sc; ++i) mine[i] = (int64_t{me.rank} << 40) + i;
      if (inPlace) memcpy(all64.data() + me.groupRank * sc, mine.data(), sc * 8);
      me.next(CollKind::kAllGather);
      me.be->allGather(inPlace ? all64.data() + me.groupRank * sc : mine.data(), all64.data(), sc, hetcclInt64, nullptr);
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
      if (me.groupRank == root) me.be->broadcast(src.data(), dst.data(), bytes, hetcclUint8, root, nullptr);
      else me.be->broadcast(dst.data(), dst.data(), bytes, hetcclUint8, root, nullptr);
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

TEST(NcclApi, MissingLibraryNamesThePathAndTheVariable) {
  const std::string path = "/nonexistent/hetccl-test/libnccl.so.2";
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath(path, "nccl"), hetcclSystemError, path);
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath(path, "nccl"), hetcclSystemError, "HETCCL_NCCL_LIB");
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath(path, "rccl"), hetcclSystemError, "HETCCL_RCCL_LIB");
}

TEST(NcclApi, LibraryThatIsNotNcclNamesTheMissingFunction) {
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath("libm.so.6", "nccl"), hetcclInvalidUsage, "ncclGetVersion");
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath("libm.so.6", "nccl"), hetcclInvalidUsage, "libm.so.6");
  EXPECT_HETCCL_ERROR(nccl::loadNcclApiFromPath("libm.so.6", "rccl"), hetcclInvalidUsage, "HETCCL_RCCL_LIB");
}

TEST(NcclApi, VersionStrings) {
  EXPECT_EQ(nccl::ncclVersionString(22805), "2.28.5");
  EXPECT_EQ(nccl::ncclVersionString(21200), "2.12.0");
  EXPECT_EQ(nccl::ncclVersionString(2708), "2.7.8");
}

// config() reads the environment at every get, so the variable takes effect.
TEST(NcclApi, CreateBackendWithABadLibraryPathSaysWhatToSet) {
  BackendContext bc;
  bc.ranks = {0};
  const std::string bad = "/nonexistent/hetccl-test/libbad.so";
  {
    test::EnvGuard env("HETCCL_NCCL_LIB", bad.c_str());
    EXPECT_HETCCL_ERROR(createBackend("nccl", bc), hetcclSystemError, bad);
    EXPECT_HETCCL_ERROR(createBackend("nccl", bc), hetcclSystemError, "HETCCL_NCCL_LIB");
  }
  test::EnvGuard env("HETCCL_RCCL_LIB", bad.c_str());
  EXPECT_HETCCL_ERROR(createBackend("rccl", bc), hetcclSystemError, "HETCCL_RCCL_LIB");
}

// No GPU needed: only ncclGetVersion and ncclGetErrorString are called.
TEST(NcclApi, InstalledNcclLoadsAndReportsItsVersion) {
  test::EnvGuard env("HETCCL_NCCL_LIB", nullptr);
  const nccl::NcclApi* api = nullptr;
  try {
    api = &nccl::loadNcclApi("nccl");
  } catch (const Error& e) {
    GTEST_SKIP() << "no loadable NCCL here: " << e.what();
  }
  EXPECT_EQ(api, &nccl::loadNcclApi("nccl")) << "loaded once";
  int v = 0;
  ASSERT_EQ(api->getVersion(&v), nccl::ncclSuccess);
  EXPECT_GE(v, nccl::kMinVersion);
  EXPECT_EQ(v, api->version);
  EXPECT_NE(api->path.find("nccl"), std::string::npos) << api->path;
  ASSERT_NE(api->getErrorString(nccl::ncclInvalidArgument), nullptr);
  EXPECT_EQ(&nccl::loadNcclApiFromPath(api->path, "nccl"), api) << "one table per file";
}

// --- NCCL-ABI backend: calls, over a table of fakes ---

struct FakeNccl {
  nccl::ncclResult_t next = nccl::ncclSuccess;  // what the next collective returns
  nccl::ncclResult_t async = nccl::ncclSuccess;
  std::vector<std::string> calls;
  int nranks = -1, rank = -1;
  uint8_t id[128] = {};
  int dtype = -1, op = -1;
  uint64_t scalarBits = 0;
  int scalarType = -1, residence = -1;
  int created = 0, destroyed = 0;
  const void* stream = nullptr;
};
FakeNccl fake;
nccl::ncclComm_t fakeComm() { return reinterpret_cast<nccl::ncclComm_t>(&fake); }

nccl::NcclApi fakeApi(int version = 22805) {
  using namespace nccl;
  NcclApi a;
  a.flavor = "nccl";
  a.path = "/fake/libnccl.so.2";
  a.version = version;
  a.getUniqueId = [](ncclUniqueId* id) {
    for (int i = 0; i < 128; ++i) id->internal[i] = static_cast<char>(i + 1);
    return ncclSuccess;
  };
  a.commInitRank = [](ncclComm_t* c, int n, ncclUniqueId id, int r) {
    fake.calls.push_back("init");
    fake.nranks = n, fake.rank = r;
    memcpy(fake.id, id.internal, 128);
    *c = fakeComm();
    return fake.next;
  };
  a.commDestroy = [](ncclComm_t) { return fake.calls.push_back("destroy"), ncclSuccess; };
  a.commAbort = [](ncclComm_t) { return fake.calls.push_back("abort"), ncclSuccess; };
  a.commGetAsyncError = [](ncclComm_t, ncclResult_t* e) { return *e = fake.async, ncclSuccess; };
  a.getErrorString = [](ncclResult_t) { return "fake error string"; };
  a.getLastError = [](ncclComm_t) { return "fake last error"; };
  a.allReduce = [](const void*, void*, size_t, ncclDataType_t t, ncclRedOp_t o, ncclComm_t, cudaStream_t s) {
    fake.calls.push_back("allreduce");
    fake.dtype = t, fake.op = o, fake.stream = s;
    return fake.next;
  };
  a.reduceScatter = [](const void*, void*, size_t, ncclDataType_t t, ncclRedOp_t o, ncclComm_t, cudaStream_t) {
    fake.dtype = t, fake.op = o;
    return fake.calls.push_back("reducescatter"), fake.next;
  };
  a.allGather = [](const void*, void*, size_t, ncclDataType_t t, ncclComm_t, cudaStream_t) {
    fake.dtype = t;
    return fake.calls.push_back("allgather"), fake.next;
  };
  a.broadcast = [](const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    return fake.calls.push_back("broadcast"), fake.next;
  };
  a.reduce = [](const void*, void*, size_t, ncclDataType_t, ncclRedOp_t o, int, ncclComm_t, cudaStream_t) {
    fake.op = o;
    return fake.calls.push_back("reduce"), fake.next;
  };
  a.send = [](const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    return fake.calls.push_back("send"), fake.next;
  };
  a.recv = [](void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
    return fake.calls.push_back("recv"), fake.next;
  };
  a.groupStart = [] { return fake.calls.push_back("groupstart"), ncclSuccess; };
  a.groupEnd = [] { return fake.calls.push_back("groupend"), ncclSuccess; };
  a.redOpCreatePreMulSum = [](ncclRedOp_t* o, void* scalar, ncclDataType_t t, ncclScalarResidence_t r, ncclComm_t) {
    fake.scalarBits = 0;
    memcpy(&fake.scalarBits, scalar, t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2);
    fake.scalarType = t, fake.residence = r;
    ++fake.created;
    *o = static_cast<ncclRedOp_t>(5 + fake.created);
    return ncclSuccess;
  };
  a.redOpDestroy = [](ncclRedOp_t, ncclComm_t) { return ++fake.destroyed, ncclSuccess; };
  return a;
}

BackendContext fakeContext() {
  BackendContext bc;
  bc.ranks = {3, 5, 7, 9};
  bc.groupRank = 2;
  return bc;
}

// A connected backend over `api`, with the fake's record cleared.
std::unique_ptr<NcclBackend> connectedFake(const nccl::NcclApi& api) {
  fake = FakeNccl{};
  auto be = std::make_unique<NcclBackend>(fakeContext(), api);
  uint8_t id[kBackendIdBytes];
  be->makeId(id);
  be->connect(id);
  fake.calls.clear();
  return be;
}

TEST(NcclBackendFake, MakeIdAndConnectPassTheGroupShape) {
  auto api = fakeApi();
  fake = FakeNccl{};
  NcclBackend be(fakeContext(), api);
  EXPECT_STREQ(be.name(), "nccl");
  EXPECT_HETCCL_ERROR(be.allGather(nullptr, nullptr, 1, hetcclInt8, nullptr), hetcclInternalError, "before connect");
  uint8_t id[kBackendIdBytes];
  be.makeId(id);
  EXPECT_EQ(id[0], 1);
  EXPECT_EQ(id[127], 128);
  be.connect(id);
  EXPECT_EQ(fake.nranks, 4);
  EXPECT_EQ(fake.rank, 2);
  EXPECT_EQ(memcmp(fake.id, id, 128), 0);
  EXPECT_HETCCL_ERROR(be.connect(id), hetcclInternalError, "twice");
}

TEST(NcclBackendFake, TypesAndOpsMapToTheSameNumbers) {
  auto api = fakeApi();
  auto be = connectedFake(api);
  int streamTag;
  for (RedKind k : {RedKind::kSum, RedKind::kProd, RedKind::kMax, RedKind::kMin}) {
    be->allReduce(nullptr, nullptr, 10, hetcclBfloat16, k, &streamTag);
    EXPECT_EQ(fake.op, static_cast<int>(k));
    EXPECT_EQ(fake.dtype, nccl::ncclBfloat16);
    EXPECT_EQ(fake.stream, &streamTag);
  }
  be->allGather(nullptr, nullptr, 10, hetcclUint64, nullptr);
  EXPECT_EQ(fake.dtype, nccl::ncclUint64);
  ReduceOp avg;  // integer Avg: sum then divide by the group's size
  avg.postDiv = true;
  avg.divisor = 4;
  be->reduceScatter(nullptr, nullptr, 10, hetcclInt32, avg, nullptr);
  EXPECT_EQ(fake.op, nccl::ncclAvg);
  avg.divisor = 8;
  EXPECT_HETCCL_ERROR(be->reduceScatter(nullptr, nullptr, 10, hetcclInt32, avg, nullptr), hetcclInternalError,
                      "division by 8");
  ReduceOp favg;  // float Avg over this group: NCCL's own, no op created
  favg.preMul = true, favg.scalar = 1.0 / 4, favg.userOp = hetcclAvg;
  be->reduce(nullptr, nullptr, 10, hetcclFloat32, favg, 0, nullptr);
  EXPECT_EQ(fake.op, nccl::ncclAvg);
  EXPECT_EQ(fake.created, 0);
  ReduceOp bad;
  bad.preMul = true, bad.kind = RedKind::kMax;
  EXPECT_HETCCL_ERROR(be->allReduce(nullptr, nullptr, 1, hetcclFloat32, bad, nullptr), hetcclInternalError, "max");
}

TEST(NcclBackendFake, PreMulSumScalarInTheElementTypeAndDestroyedAfterTheCall) {
  auto api = fakeApi();
  auto be = connectedFake(api);
  ReduceOp pm;
  pm.preMul = true, pm.scalar = 0.5, pm.userOp = static_cast<hetcclRedOp_t>(hetcclNumOps);
  struct Case {
    DataType dt;
    uint64_t bits;
  };
  double d = 0.5;
  float f = 0.5f;
  uint64_t dbits = 0, fbits = 0;
  memcpy(&dbits, &d, 8);
  memcpy(&fbits, &f, 4);
  for (Case c : {Case{hetcclFloat16, 0x3800}, Case{hetcclBfloat16, 0x3f00}, Case{hetcclFloat32, fbits},
                 Case{hetcclFloat64, dbits}}) {
    int before = fake.created;
    be->allReduce(nullptr, nullptr, 10, c.dt, pm, nullptr);
    EXPECT_EQ(fake.created, before + 1);
    EXPECT_EQ(fake.destroyed, fake.created) << dataTypeName(c.dt);
    EXPECT_EQ(fake.op, 5 + fake.created) << "the call used the created op";
    EXPECT_EQ(fake.scalarType, static_cast<int>(c.dt));
    EXPECT_EQ(fake.residence, nccl::ncclScalarHostImmediate);
    EXPECT_EQ(fake.scalarBits, c.bits) << dataTypeName(c.dt);
  }
  for (DataType dt : {hetcclInt32, hetcclUint8, hetcclFloat8e4m3})
    EXPECT_HETCCL_ERROR(be->allReduce(nullptr, nullptr, 1, dt, pm, nullptr), hetcclInvalidArgument, dataTypeName(dt));
  // A failing call still destroys its op.
  fake.next = nccl::ncclInvalidArgument;
  int before = fake.destroyed;
  EXPECT_HETCCL_ERROR(be->allReduce(nullptr, nullptr, 1, hetcclFloat32, pm, nullptr), hetcclInvalidArgument,
                      "ncclAllReduce");
  EXPECT_EQ(fake.destroyed, before + 1);
}

TEST(NcclBackendFake, Fp8NeedsNccl224) {
  auto old = fakeApi(22305);
  auto be = connectedFake(old);
  EXPECT_HETCCL_ERROR(be->allGather(nullptr, nullptr, 1, hetcclFloat8e5m2, nullptr), hetcclInvalidArgument,
                      "fp8_e5m2 needs NCCL 2.24.0 or newer; the nccl backend loaded version 2.23.5");
  be->allGather(nullptr, nullptr, 1, hetcclBfloat16, nullptr);
  auto api = fakeApi(22400);
  be = connectedFake(api);
  be->allReduce(nullptr, nullptr, 1, hetcclFloat8e4m3, RedKind::kMax, nullptr);
  EXPECT_EQ(fake.dtype, nccl::ncclFloat8e4m3);
}

TEST(NcclBackendFake, FailuresNameTheFunctionAndTheLibraryText) {
  auto api = fakeApi();
  auto be = connectedFake(api);
  const std::pair<nccl::ncclResult_t, hetcclResult_t> codes[] = {
      {nccl::ncclUnhandledCudaError, hetcclUnhandledDeviceError}, {nccl::ncclSystemError, hetcclSystemError},
      {nccl::ncclInternalError, hetcclInternalError},             {nccl::ncclInvalidUsage, hetcclInvalidUsage},
      {nccl::ncclRemoteError, hetcclRemoteError}};
  for (auto [nc, hc] : codes) {
    fake.next = nc;
    EXPECT_HETCCL_ERROR(be->send(nullptr, 1, hetcclInt8, 0, nullptr), hc, "ncclSend failed: fake error string");
    EXPECT_HETCCL_ERROR(be->recv(nullptr, 1, hetcclInt8, 0, nullptr), hc, "last error: fake last error");
  }
  fake.next = nccl::ncclSuccess;
  fake.async = nccl::ncclInProgress;
  EXPECT_EQ(be->asyncError(), hetcclSuccess);
  fake.async = nccl::ncclRemoteError;
  EXPECT_EQ(be->asyncError(), hetcclRemoteError);
  // Without ncclGetLastError (old libraries) the message still names the call.
  auto noLast = fakeApi();
  noLast.getLastError = nullptr;
  be = connectedFake(noLast);
  fake.next = nccl::ncclSystemError;
  EXPECT_HETCCL_ERROR(be->broadcast(nullptr, nullptr, 1, hetcclInt8, 0, nullptr), hetcclSystemError,
                      "ncclBroadcast failed");
}

TEST(NcclBackendFake, GroupCallsNestAndPassThrough) {
  auto api = fakeApi();
  auto be = connectedFake(api);
  be->groupStart();
  be->groupStart();
  be->send(nullptr, 1, hetcclInt8, 1, nullptr);
  be->recv(nullptr, 1, hetcclInt8, 1, nullptr);
  be->groupEnd();
  be->groupEnd();
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"groupstart", "groupstart", "send", "recv", "groupend", "groupend"}));
  EXPECT_HETCCL_ERROR(be->groupEnd(), hetcclInvalidUsage, "without groupStart");
}

TEST(NcclBackendFake, AbortOnceThenNoDestroy) {
  auto api = fakeApi();
  {
    auto be = connectedFake(api);
    be->abort();
    be->abort();
    EXPECT_HETCCL_ERROR(be->allGather(nullptr, nullptr, 1, hetcclInt8, nullptr), hetcclInvalidUsage, "aborted");
    EXPECT_EQ(be->asyncError(), hetcclSuccess);
  }
  EXPECT_EQ(fake.calls, std::vector<std::string>{"abort"});
  {
    auto be = connectedFake(api);
  }
  EXPECT_EQ(fake.calls, std::vector<std::string>{"destroy"});
  // Never connected: nothing to destroy or abort.
  fake = FakeNccl{};
  {
    NcclBackend be(fakeContext(), api);
    be.abort();
  }
  EXPECT_TRUE(fake.calls.empty());
}

TEST(NcclBackendFake, FailedInitAbortsWhatTheLibraryLeft) {
  auto api = fakeApi();
  fake = FakeNccl{};
  NcclBackend be(fakeContext(), api);
  uint8_t id[kBackendIdBytes] = {};
  fake.next = nccl::ncclRemoteError;
  EXPECT_HETCCL_ERROR(be.connect(id), hetcclRemoteError, "group rank 2 of 4): ncclCommInitRank failed");
  EXPECT_EQ(fake.calls, (std::vector<std::string>{"init", "abort"}));
}

}  // namespace
}  // namespace hetccl
