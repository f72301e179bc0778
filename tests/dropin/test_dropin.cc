// The NCCL-ABI drop-in (libnccl.so.2 built from src/dropin), loaded with
// dlopen as a program built for NCCL would load it: every symbol PyTorch
// imports is there, calls reach hetccl (here on host ranks, in two groups),
// results are right, and what hetccl cannot honour is a clear
// ncclInvalidUsage, not a silent success.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "command_output.h"
#include "dropin_fixture.h"

namespace {

using dropin_test::Comm;
using dropin_test::DropIn;
using dropin_test::Id;

// The 38 NCCL functions PyTorch 2.11's libtorch_cuda.so imports (a subset
// of what the tests below check against nccl.h and exports.txt).
const char* const kTorchImports[] = {"ncclAllGather",
                                     "ncclAllReduce",
                                     "ncclAlltoAll",
                                     "ncclBcast",
                                     "ncclBroadcast",
                                     "ncclCommAbort",
                                     "ncclCommCount",
                                     "ncclCommDeregister",
                                     "ncclCommDestroy",
                                     "ncclCommFinalize",
                                     "ncclCommGetAsyncError",
                                     "ncclCommInitAll",
                                     "ncclCommInitRank",
                                     "ncclCommInitRankConfig",
                                     "ncclCommInitRankScalable",
                                     "ncclCommRegister",
                                     "ncclCommShrink",
                                     "ncclCommSplit",
                                     "ncclCommUserRank",
                                     "ncclCommWindowDeregister",
                                     "ncclCommWindowRegister",
                                     "ncclDevCommCreate",
                                     "ncclDevCommDestroy",
                                     "ncclGetErrorString",
                                     "ncclGetLastError",
                                     "ncclGetUniqueId",
                                     "ncclGetVersion",
                                     "ncclGroupEnd",
                                     "ncclGroupSimulateEnd",
                                     "ncclGroupStart",
                                     "ncclMemAlloc",
                                     "ncclMemFree",
                                     "ncclRecv",
                                     "ncclRedOpCreatePreMulSum",
                                     "ncclRedOpDestroy",
                                     "ncclReduce",
                                     "ncclReduceScatter",
                                     "ncclSend"};

// the environment it was started with, after the drop-in's load.
TEST(DropInLoad, SetsCudaHardwareQueuesWhereTheJobSetsNone) {
#ifdef HETCCL_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer build's drop-in cannot be preloaded into the shell (built without the sanitizer)";
#endif
  const std::string preload = std::string("LD_PRELOAD=") + HETCCL_TEST_DROPIN_LIB + " ";
  const std::string show = "sh -c 'echo \"[$CUDA_DEVICE_MAX_CONNECTIONS]\"'";
  auto run = [&](const std::string& env) {
    int status = -1;
    const std::string out = hetccl_test::commandOutput(
        "env -u CUDA_DEVICE_MAX_CONNECTIONS -u HETCCL_CUDA_CONNECTIONS " + env + preload + show, &status);
    EXPECT_EQ(status, 0) << env;
    return out;
  };
  EXPECT_EQ(run(""), "[32]\n");
  EXPECT_EQ(run("CUDA_DEVICE_MAX_CONNECTIONS=1 "), "[1]\n");
  EXPECT_EQ(run("HETCCL_CUDA_CONNECTIONS=16 "), "[16]\n");
  EXPECT_EQ(run("HETCCL_CUDA_CONNECTIONS=0 "), "[]\n");
  EXPECT_EQ(run("CUDA_DEVICE_MAX_CONNECTIONS= "), "[32]\n");  // set but empty: none
}

TEST_F(DropIn, ExportsEverythingPyTorchImports) {
  for (const char* name : kTorchImports) EXPECT_NE(dlsym(lib_, name), nullptr) << name;
  EXPECT_EQ(dlsym(lib_, "hetcclAllReduce"), nullptr) << "only nccl* symbols are exported";
  int v = 0;
  ASSERT_EQ(fn<int (*)(int*)>("ncclGetVersion")(&v), 0);
  EXPECT_GE(v, 21200);
}

// Every function nccl.h declares (the installed 2.28.9), the later additions
// torch may import, and each one's pnccl* twin.
TEST_F(DropIn, ExportsEveryFunctionOfNcclHAndTheLaterOnesWithTheirTwins) {
  std::vector<std::string> names;
#ifdef HETCCL_TEST_NCCL_H
  std::ifstream h(HETCCL_TEST_NCCL_H);
  ASSERT_TRUE(h.good()) << HETCCL_TEST_NCCL_H;
  std::string line;
  std::regex decl(R"(^\s*(ncclResult_t|const char\s*\*|void)\s+(nccl[A-Za-z0-9]+)\s*\()");
  std::smatch m;
  while (std::getline(h, line))
    if (std::regex_search(line, m, decl)) names.push_back(m[2]);
  EXPECT_GE(names.size(), 38u) << "nccl.h declares the 38 functions torch imports and more";
#endif
  for (const char* later :
       {"ncclCommRevoke", "ncclCommSuspend", "ncclCommResume", "ncclCommMemStats", "ncclCommGrow",
        "ncclCommGetUniqueId", "ncclCommQueryProperties", "ncclPutSignal", "ncclSignal", "ncclWaitSignal",
        "ncclWinGetUserPtr", "ncclResetDebugInit", "ncclDevCommCreate", "ncclDevCommDestroy"})
    names.push_back(later);
  for (const auto& n : names) {
    EXPECT_NE(dlsym(lib_, n.c_str()), nullptr) << n;
    EXPECT_EQ(dlsym(lib_, ("p" + n).c_str()), dlsym(lib_, n.c_str())) << "p" << n << " is not " << n << "'s twin";
  }
  // What exports.txt lists is what the library exports.
  std::ifstream ex(HETCCL_TEST_EXPORTS);
  std::string fn;
  int listed = 0;
  while (std::getline(ex, fn))
    if (fn.rfind("nccl", 0) == 0) {
      ++listed;
      EXPECT_NE(dlsym(lib_, fn.c_str()), nullptr) << fn;
    }
  EXPECT_GE(listed, 69);  // with 2.30's Parameter API (test_dropin_param.cc checks its names)
}

TEST_F(DropIn, HostRanksInTwoGroupsComputeRightAndRefuseWhatIsUnsupported) {
  setenv("HETCCL_DEVICE", "host", 1);
  setenv("HETCCL_GROUP_MAP", "0:a,1-2:b", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto bcast = fn<int (*)(void*, size_t, int, int, Comm, void*)>("ncclBcast");
  auto shrink = fn<int (*)(Comm, int*, int, Comm*, void*, int)>("ncclCommShrink");
  auto windowRegister = fn<int (*)(Comm, void*, size_t, void**, int)>("ncclCommWindowRegister");
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
      void* win = nullptr;
      std::vector<char> wbuf(4096);
      if (windowRegister(c, wbuf.data(), wbuf.size(), &win, 0) != 5) errs[r] += "window register did not refuse; ";
      if (std::string(lastError(c)).find("not supported by hetccl across groups") == std::string::npos)
        errs[r] += std::string("window message: ") + lastError(c) + "; ";
      // Shrink without rank 0 (group a): ranks 1 and 2 go on, in group b.
      if (r != 0) {
        int gone = 0;
        Comm nc = nullptr;
        if (shrink(c, &gone, 1, &nc, nullptr, 0) != 0) errs[r] += std::string("shrink: ") + lastError(c) + "; ";
        int k2 = 0;
        if (!nc || count(nc, &k2) != 0 || k2 != 2) errs[r] += "shrunk count; ";
        std::vector<float> one(10, static_cast<float>(r)), sum(10);
        if (nc && (allReduce(one.data(), sum.data(), 10, 7, 0, nc, nullptr) != 0 || sum[9] != 3.0f))
          errs[r] += "allreduce after shrink; ";
        if (nc && destroy(nc) != 0) errs[r] += "destroy shrunk; ";
      }
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

namespace {

// As under LD_PRELOAD with a real NCCL: the drop-in first in the global
// lookup, and a vendor library behind it that calls its own API through its
// PLT (the emulated GPU's group library, src/emu, which refuses handles it did not make, as NCCL does).
// One group of three ranks: every call goes straight to the vendor library.
// Before the vendor library's own calls were bound back to it, every call
// here failed with ncclInvalidUsage, like every real NCCL call did.
TEST_F(DropIn, OneGroupRunsOnAVendorLibraryThatCallsItsOwnApi) {
  ASSERT_NE(dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL), nullptr) << dlerror();
  setenv("HETCCL_DEVICE", "host", 1);
  setenv("HETCCL_BACKEND", "nccl", 1);
  setenv("HETCCL_NCCL_LIB", HETCCL_TEST_EMU_NCCL, 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto bcast = fn<int (*)(void*, size_t, int, int, Comm, void*)>("ncclBcast");
  auto reduce = fn<int (*)(const void*, void*, size_t, int, int, int, Comm, void*)>("ncclReduce");
  auto allGather = fn<int (*)(const void*, void*, size_t, int, Comm, void*)>("ncclAllGather");
  auto reduceScatter = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclReduceScatter");
  auto alltoall = fn<int (*)(const void*, void*, size_t, int, Comm, void*)>("ncclAlltoAll");
  auto send = fn<int (*)(const void*, size_t, int, int, Comm, void*)>("ncclSend");
  auto recv = fn<int (*)(void*, size_t, int, int, Comm, void*)>("ncclRecv");
  auto groupStart = fn<int (*)()>("ncclGroupStart");
  auto groupEnd = fn<int (*)()>("ncclGroupEnd");
  auto premul = fn<int (*)(int*, void*, int, int, Comm)>("ncclRedOpCreatePreMulSum");
  auto opDestroy = fn<int (*)(int, Comm)>("ncclRedOpDestroy");
  auto reg = fn<int (*)(Comm, void*, size_t, void**)>("ncclCommRegister");
  auto dereg = fn<int (*)(Comm, void*)>("ncclCommDeregister");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  const int n = 3;
  const size_t N = 1000;
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      auto err = [&](const std::string& what, Comm c) { errs[r] += what + ": " + lastError(c) + "; "; };
      Comm c = nullptr;
      if (init(&c, n, id, r) != 0) return err("init", nullptr);
      std::vector<float> in(N), out(N);
      for (size_t i = 0; i < N; ++i) in[i] = static_cast<float>(r * 1000 + i);
      if (allReduce(in.data(), out.data(), N, 7, 0, c, nullptr) != 0)
        err("allreduce", c);
      else if (out[N - 1] != 3.0f * (N - 1) + 3000.0f)
        errs[r] += "allreduce value; ";
      std::vector<int> b(10, r == 2 ? 42 : -1);
      if (bcast(b.data(), 10, 2, 2, c, nullptr) != 0)
        err("bcast", c);
      else if (b[9] != 42)
        errs[r] += "bcast value; ";
      std::vector<double> d(5, r + 1.0), dsum(5, 0);
      if (reduce(d.data(), dsum.data(), 5, 8, 2 /*max*/, 1, c, nullptr) != 0)
        err("reduce", c);
      else if (r == 1 && dsum[4] != 3.0)
        errs[r] += "reduce value; ";
      std::vector<int64_t> mine(4, r), all(4 * n);
      if (allGather(mine.data(), all.data(), 4, 4, c, nullptr) != 0)
        err("allgather", c);
      else if (all[4 * 2] != 2)
        errs[r] += "allgather value; ";
      std::vector<int> rsIn(2 * n, 1), rsOut(2);
      if (reduceScatter(rsIn.data(), rsOut.data(), 2, 2, 0, c, nullptr) != 0)
        err("reducescatter", c);
      else if (rsOut[1] != n)
        errs[r] += "reducescatter value; ";
      std::vector<int> a2aIn(n), a2aOut(n);
      for (int p = 0; p < n; ++p) a2aIn[p] = r * 10 + p;
      if (alltoall(a2aIn.data(), a2aOut.data(), 1, 2, c, nullptr) != 0)
        err("alltoall", c);
      else if (a2aOut[2] != 20 + r)
        errs[r] += "alltoall value; ";
      int token = r, got = -1;
      groupStart();
      send(&token, 1, 2, (r + 1) % n, c, nullptr);
      recv(&got, 1, 2, (r + n - 1) % n, c, nullptr);
      if (groupEnd() != 0)
        err("send/recv group", c);
      else if (got != (r + n - 1) % n)
        errs[r] += "send/recv value; ";
      // PreMulSum with its scalar in "device" memory (this rank's memory):
      // read when the call runs, not when the op is made.
      float factor = 100.0f;
      int op = -1;
      if (premul(&op, &factor, 7, 0 /*ncclScalarDevice*/, c) != 0) err("premulsum", c);
      factor = 2.0f;
      std::vector<float> ones(8, 1.0f), scaled(8);
      if (allReduce(ones.data(), scaled.data(), 8, 7, op, c, nullptr) != 0)
        err("premulsum allreduce", c);
      else if (scaled[7] != 2.0f * n)
        errs[r] += "premulsum read the scalar early: " + std::to_string(scaled[7]) + "; ";
      if (opDestroy(op, c) != 0) err("op destroy", c);
      void* h = nullptr;
      if (reg(c, in.data(), N * 4, &h) != 0 || dereg(c, h) != 0) err("register", c);
      if (destroy(c) != 0) err("destroy", c);
    });
  for (auto& t : ts) t.join();
  for (const char* v : {"HETCCL_DEVICE", "HETCCL_BACKEND", "HETCCL_NCCL_LIB"}) unsetenv(v);
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
  void* vendor = dlopen(HETCCL_TEST_EMU_NCCL, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(vendor, nullptr) << "the vendor library was never loaded";
  auto selfCalls = reinterpret_cast<long (*)()>(dlsym(vendor, "hetcclEmuNcclSelfCalls"));
  ASSERT_NE(selfCalls, nullptr);
  EXPECT_GE(selfCalls(), 3 * 9) << "the vendor library's calls to its own API did not reach it";
}
}  // namespace
