// The NCCL-ABI drop-in (libnccl.so.2 built from src/dropin), loaded with
// dlopen as a program built for NCCL would load it: every symbol PyTorch
// imports is there, calls reach hetccl (here on host ranks, in two groups),
// results are right, and what hetccl cannot honour is a clear
// ncclInvalidUsage, not a silent success.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// The 38 NCCL functions PyTorch 2.11's libtorch_cuda.so imports.
const char* const kTorchImports[] = {
    "ncclAllGather", "ncclAllReduce", "ncclAlltoAll", "ncclBcast", "ncclBroadcast", "ncclCommAbort",
    "ncclCommCount", "ncclCommDeregister", "ncclCommDestroy", "ncclCommFinalize", "ncclCommGetAsyncError",
    "ncclCommInitAll", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable",
    "ncclCommRegister", "ncclCommShrink", "ncclCommSplit", "ncclCommUserRank", "ncclCommWindowDeregister",
    "ncclCommWindowRegister", "ncclDevCommCreate", "ncclDevCommDestroy", "ncclGetErrorString", "ncclGetLastError",
    "ncclGetUniqueId", "ncclGetVersion", "ncclGroupEnd", "ncclGroupSimulateEnd", "ncclGroupStart", "ncclMemAlloc",
    "ncclMemFree", "ncclRecv", "ncclRedOpCreatePreMulSum", "ncclRedOpDestroy", "ncclReduce", "ncclReduceScatter",
    "ncclSend"};

struct Id {
  char b[128];
};
using Comm = void*;

class DropIn : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
  }
  template <typename F>
  F fn(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  void* lib_ = nullptr;
};

TEST_F(DropIn, ExportsEverythingPyTorchImports) {
  for (const char* name : kTorchImports) EXPECT_NE(dlsym(lib_, name), nullptr) << name;
  EXPECT_EQ(dlsym(lib_, "hetcclAllReduce"), nullptr) << "only nccl* symbols are exported";
  int v = 0;
  ASSERT_EQ(fn<int (*)(int*)>("ncclGetVersion")(&v), 0);
  EXPECT_GE(v, 21200);
}

TEST_F(DropIn, HostRanksInTwoGroupsComputeRightAndRefuseWhatIsUnsupported) {
  setenv("HETCCL_DEVICE", "host", 1);
  setenv("HETCCL_GROUP_MAP", "0:a,1-2:b", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto bcast = fn<int (*)(void*, size_t, int, int, Comm, void*)>("ncclBcast");
  auto shrink = fn<int (*)(Comm, int*, int, Comm*, void*, int)>("ncclCommShrink");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto count = fn<int (*)(Comm, int*)>("ncclCommCount");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  const int n = 3;
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      Comm c = nullptr;
      if (init(&c, n, id, r) != 0) return void(errs[r] = "init failed");
      int k = 0;
      if (count(c, &k) != 0 || k != n) errs[r] += "count; ";
      std::vector<float> in(1000), out(1000);
      for (int i = 0; i < 1000; ++i) in[i] = static_cast<float>(r * 1000 + i);
      if (allReduce(in.data(), out.data(), 1000, 7 /*float*/, 0 /*sum*/, c, nullptr) != 0) errs[r] += "allreduce; ";
      for (int i = 0; i < 1000; ++i)
        if (out[i] != static_cast<float>(3000 + 3 * i)) {
          errs[r] += "wrong sum at " + std::to_string(i) + "; ";
          break;
        }
      std::vector<int> b(10, r == 2 ? 42 : -1);
      if (bcast(b.data(), 10, 2 /*int32*/, 2, c, nullptr) != 0 || b[9] != 42) errs[r] += "bcast; ";
      Comm nc = reinterpret_cast<Comm>(1);
      int rc = shrink(c, nullptr, 0, &nc, nullptr, 0);
      if (rc != 5 || nc != nullptr) errs[r] += "shrink did not refuse; ";
      if (std::string(lastError(c)).find("not supported") == std::string::npos)
        errs[r] += std::string("shrink message: ") + lastError(c) + "; ";
      if (destroy(c) != 0) errs[r] += "destroy; ";
    });
  for (auto& t : ts) t.join();
  unsetenv("HETCCL_DEVICE");
  unsetenv("HETCCL_GROUP_MAP");
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

TEST_F(DropIn, ConfigIsReadBySizeAndMagic) {
  // An NCCL 2.28 ncclConfig_t is larger than hetccl's; only its head is read.
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
    char rest[200];
  } cfg = {sizeof(cfg), 0xcafebeef, 22805, 1, {}};
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto initCfg = fn<int (*)(Comm*, int, Id, int, void*)>("ncclCommInitRankConfig");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Comm c = nullptr;
  EXPECT_EQ(initCfg(&c, 1, id, 0, &cfg), 0);
  EXPECT_EQ(destroy(c), 0);
  unsetenv("HETCCL_DEVICE");
}

// Bad input of the issue: a config not made by NCCL_CONFIG_INITIALIZER or of
// an impossible size, a unique id made by NCCL, another NCCL in the process.
TEST_F(DropIn, ConfigWithoutMagicOrOfImpossibleSizeIsRefused) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto initCfg = fn<int (*)(Comm*, int, Id, int, void*)>("ncclCommInitRankConfig");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
  } cfg = {sizeof(cfg), 0x12345678, 22805, 1};
  Comm c = nullptr;
  EXPECT_EQ(initCfg(&c, 1, id, 0, &cfg), 4);  // ncclInvalidArgument
  EXPECT_NE(std::string(lastError(nullptr)).find("NCCL_CONFIG_INITIALIZER"), std::string::npos) << lastError(nullptr);
  cfg.magic = 0xcafebeef;
  cfg.size = 4;
  EXPECT_EQ(initCfg(&c, 1, id, 0, &cfg), 4);
  EXPECT_NE(std::string(lastError(nullptr)).find("config size 4"), std::string::npos) << lastError(nullptr);
  EXPECT_EQ(c, nullptr);
  unsetenv("HETCCL_DEVICE");
}

TEST_F(DropIn, UniqueIdMadeByNcclIsRefused) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  // NCCL's id: a random 64-bit magic, then the root's socket address.
  Id id{};
  const uint64_t magic = 0x1d2c3b4a59687766ull;
  memcpy(id.b, &magic, sizeof(magic));
  const uint16_t family = 2;  // AF_INET
  memcpy(id.b + 8, &family, sizeof(family));
  Comm c = nullptr;
  EXPECT_EQ(init(&c, 2, id, 0), 4);
  EXPECT_NE(std::string(lastError(nullptr)).find("not made by hetcclGetUniqueId"), std::string::npos)
      << lastError(nullptr);
  unsetenv("HETCCL_DEVICE");
}

// A vendor libnccl.so.2 to load beside the drop-in, or null (the test skips).
void* loadVendorNccl(std::string& why) {
  const char* candidates[] = {"/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2",
                              "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  for (const char* p : candidates) {
    // Already loaded: the drop-in drives it (ncclGetVersion in an earlier
    // test of this process). ctest runs each test alone.
    if (void* h = dlopen(p, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);
      why = std::string(p) + " is already loaded";
      return nullptr;
    }
    if (void* real = dlopen(p, RTLD_NOW | RTLD_GLOBAL)) {
      if (!dlsym(real, "hetcclDropinFlavor")) return real;
      why = std::string(p) + " is hetccl's";
      return nullptr;
    }
  }
  why = "no vendor libnccl.so.2 to load beside the drop-in";
  return nullptr;
}

// The vendor library comes first in the global symbol lookup: a call by name
// would reach it, not hetccl. Refused with a message naming it.
TEST_F(DropIn, AnotherNcclAheadInTheLookupIsRefused) {
  std::string why;
  if (!loadVendorNccl(why)) GTEST_SKIP() << why;
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Comm c = nullptr;
  EXPECT_EQ(init(&c, 1, id, 0), 5);  // ncclInvalidUsage
  EXPECT_NE(std::string(lastError(nullptr)).find("comes before hetccl's"), std::string::npos) << lastError(nullptr);
  EXPECT_EQ(c, nullptr);
  unsetenv("HETCCL_DEVICE");
}

// As under LD_PRELOAD with PyTorch's wheels: the drop-in is first in the
// global lookup and the vendor library is loaded after it by path. Calls by
// name reach hetccl, so the communicator is made.
TEST_F(DropIn, AnotherNcclBehindThisOneIsAllowed) {
  ASSERT_NE(dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), nullptr) << dlerror();
  std::string why;
  if (!loadVendorNccl(why)) GTEST_SKIP() << why;
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Comm c = nullptr;
  ASSERT_EQ(init(&c, 1, id, 0), 0) << lastError(nullptr);
  EXPECT_EQ(destroy(c), 0);
  unsetenv("HETCCL_DEVICE");
}

}  // namespace
