// backend/nccl: the NCCL-ABI backend's loader (no GPU: no communicator is
// made) and its call mapping, over a table of fake library functions.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/nccl/nccl_api.h"
#include "backend/nccl/nccl_backend.h"
#include "backend/nccl/self_bind.h"
#include "unit_util.h"

namespace hetccl {
namespace {
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
      {nccl::ncclUnhandledCudaError, hetcclUnhandledDeviceError},
      {nccl::ncclSystemError, hetcclSystemError},
      {nccl::ncclInternalError, hetcclInternalError},
      {nccl::ncclInvalidUsage, hetcclInvalidUsage},
      {nccl::ncclRemoteError, hetcclRemoteError}};
  for (auto [nc, hc] : codes) {
    fake.next = nc;
    EXPECT_HETCCL_ERROR(be->send(nullptr, 1, hetcclInt8, 0, nullptr), hc, "ncclSend failed: fake error string");
    EXPECT_HETCCL_ERROR(be->recv(nullptr, 1, hetcclInt8, 0, nullptr), hc, "last error: fake last error");
  }
  fake.next = nccl::ncclSuccess;
  // A non-blocking library communicator's work in flight: in progress, as
  // NCCL reports it (the communicator's own status then says so too).
  fake.async = nccl::ncclInProgress;
  EXPECT_EQ(be->asyncError(), hetcclInProgress);
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
  { auto be = connectedFake(api); }
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

// What a vendor library calls through its own PLT must reach it even when an
// NCCL-ABI library with the same names comes first in the process's lookup,
// as hetccl's drop-in does under LD_PRELOAD (self_bind.h).
namespace hetccl::selfbind {

bool has(const std::vector<std::string>& v, const char* name) { return std::find(v.begin(), v.end(), name) != v.end(); }

TEST(NcclSelfBind, NothingToDoWhenNothingComesFirst) {
  void* vendor = dlopen(HETCCL_TEST_EMU_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(vendor, nullptr) << dlerror();
  nccl::RebindResult r = nccl::rebindOwnApi(vendor, {"nccl", "pnccl"});
  EXPECT_TRUE(r.supported);
  EXPECT_TRUE(r.rebound.empty()) << r.rebound.front();
  EXPECT_GE(r.alreadyHome, 4) << "the library calls ncclCommGetAsyncError, ncclGetVersion, ncclBroadcast, "
                                 "ncclCommInitRankConfig through its PLT";
}

TEST(NcclSelfBind, EmuGroupLibraryCallsComeHomeBehindAGlobalDropin) {
  ASSERT_NE(dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  void* vendor = dlopen(HETCCL_TEST_EMU_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(vendor, nullptr) << dlerror();
  nccl::RebindResult r = nccl::rebindOwnApi(vendor, {"nccl", "pnccl"});
  for (const char* fn : {"ncclCommGetAsyncError", "ncclGetVersion", "ncclBroadcast", "ncclCommInitRankConfig"})
    EXPECT_TRUE(has(r.rebound, fn)) << fn << " was not rebound";
  nccl::RebindResult again = nccl::rebindOwnApi(vendor, {"nccl", "pnccl"});
  EXPECT_TRUE(again.rebound.empty());
  EXPECT_EQ(again.alreadyHome, r.alreadyHome + static_cast<int>(r.rebound.size()));
  // Its collectives now see its own communicator check: through the
  // loader's table (which rebinds once more, finding nothing to do).
  const nccl::NcclApi& api = nccl::loadNcclApiFromPath(HETCCL_TEST_EMU_NCCL, "nccl");
  int v = 0;
  EXPECT_EQ(api.getVersion(&v), nccl::ncclSuccess);
  EXPECT_EQ(v, 22809);
}

// The real NCCL where the backend looks for it (HETCCL_NCCL_LIB first, then
// its search paths; names the loader resolves by itself are skipped: the
// drop-in may hold the soname): no GPU is needed to load it and read its
// relocations.
TEST(NcclSelfBind, RealNcclCallsComeHomeBehindAGlobalDropin) {
  std::vector<std::string> tries;
  if (const char* given = getenv("HETCCL_NCCL_LIB")) tries.push_back(given);
  for (const std::string& p : nccl::ncclSearchPaths("nccl"))
    if (p.find('/') != std::string::npos) tries.push_back(p);
  std::string real;
  for (const std::string& p : tries)
    if (access(p.c_str(), R_OK) == 0) {
      real = p;
      break;
    }
  if (real.empty()) GTEST_SKIP() << "no NCCL where the backend looks for it";
  void* h = dlopen(real.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) {
    ASSERT_NE(dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
    h = dlopen(real.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) GTEST_SKIP() << "no NCCL at " << real << ": " << dlerror();
  if (dlsym(h, "hetcclDropinFlavor")) GTEST_SKIP() << real << " is hetccl's drop-in";
  nccl::RebindResult r = nccl::rebindOwnApi(h, {"nccl", "pnccl"});
  // The calls NCCL 2.28.9 makes to its own API through its PLT (readelf -r).
  for (const char* fn : {"ncclCommGetAsyncError", "ncclGetVersion", "ncclBroadcast", "ncclMemAlloc", "ncclMemFree",
                         "ncclCommRegister", "ncclCommDeregister", "ncclGetUniqueId", "ncclGetErrorString",
                         "ncclCommWindowDeregister", "ncclDevCommDestroy"})
    EXPECT_TRUE(has(r.rebound, fn)) << fn << " was not rebound";
  EXPECT_TRUE(nccl::rebindOwnApi(h, {"nccl", "pnccl"}).rebound.empty());
}

}  // namespace hetccl::selfbind
