// The drop-in driven as NCCL's users drive NCCL: one thread initialising and
// driving several ranks in a group, ncclCommInitAll, abort during a
// non-blocking init, and handles or configs it did not make refused.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dropin_fixture.h"

namespace {

using dropin_test::Comm;
using dropin_test::DropIn;
using dropin_test::Id;

// NCCL's pattern of one thread driving several devices: the inits inside
// one group (finished at its end, together), then collectives of all ranks
// in one group. Host ranks here (as many as threads would be GPUs).
TEST_F(DropIn, OneThreadInitsAndDrivesSeveralRanksInAGroup) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto initCfg = fn<int (*)(Comm*, int, Id, int, void*)>("ncclCommInitRankConfig");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto groupStart = fn<int (*)()>("ncclGroupStart");
  auto groupEnd = fn<int (*)()>("ncclGroupEnd");
  auto asyncError = fn<int (*)(Comm, int*)>("ncclCommGetAsyncError");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  for (int blocking : {1, 0}) {
    SCOPED_TRACE(blocking ? "blocking" : "non-blocking");
    struct {
      size_t size;
      unsigned magic, version;
      int blocking;
    } cfg = {sizeof(cfg), 0xcafebeef, 22809, blocking};
    Id id;
    ASSERT_EQ(getId(&id), 0);
    const int n = 3;
    Comm c[n] = {};
    ASSERT_EQ(groupStart(), 0);
    for (int r = 0; r < n; ++r) ASSERT_EQ(initCfg(&c[r], n, id, r, &cfg), 0) << lastError(nullptr);
    int end = groupEnd();
    ASSERT_EQ(end, blocking ? 0 : 7) << lastError(nullptr);
    auto settle = [&] {
      for (int r = 0; r < n; ++r) {
        int e = 7;
        for (int i = 0; i < 20000 && e == 7; ++i) {
          ASSERT_EQ(asyncError(c[r], &e), 0);
          if (e == 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_EQ(e, 0) << lastError(c[r]);
      }
    };
    settle();
    std::vector<std::vector<float>> bufs(n, std::vector<float>(1000));
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 1000; ++i) bufs[r][i] = static_cast<float>(r + i);
    ASSERT_EQ(groupStart(), 0);
    for (int r = 0; r < n; ++r) ASSERT_EQ(allReduce(bufs[r].data(), bufs[r].data(), 1000, 7, 0, c[r], nullptr), 0);
    ASSERT_EQ(groupEnd(), blocking ? 0 : 7) << lastError(nullptr);
    settle();
    for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][999], 3.0f * 999 + 3.0f) << "rank " << r;
    for (int r = 0; r < n; ++r) EXPECT_EQ(destroy(c[r]), 0);
  }
  unsetenv("HETCCL_DEVICE");
}

// ncclCommInitAll: one process, every rank, then one thread drives them all
// in a group.
TEST_F(DropIn, InitAllThenOneGroupOverAllRanks) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto initAll = fn<int (*)(Comm*, int, const int*)>("ncclCommInitAll");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto groupStart = fn<int (*)()>("ncclGroupStart");
  auto groupEnd = fn<int (*)()>("ncclGroupEnd");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  const int n = 4;
  Comm c[n] = {};
  ASSERT_EQ(initAll(c, n, nullptr), 0) << lastError(nullptr);
  std::vector<int> v(n);
  ASSERT_EQ(groupStart(), 0);
  for (int r = 0; r < n; ++r) {
    v[r] = r + 1;
    ASSERT_EQ(allReduce(&v[r], &v[r], 1, 2, 0, c[r], nullptr), 0);
  }
  ASSERT_EQ(groupEnd(), 0) << lastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(v[r], 10);
  for (int r = 0; r < n; ++r) EXPECT_EQ(destroy(c[r]), 0);
  unsetenv("HETCCL_DEVICE");
}

// A non-blocking communicator whose vendor library's init takes long (the
// stand-in library waits 30 s): Abort returns at once, it does not wait for
// the vendor's init.
TEST_F(DropIn, AbortDuringANonBlockingVendorInitReturnsAtOnce) {
  setenv("HETCCL_DEVICE", "host", 1);
  setenv("HETCCL_BACKEND", "nccl", 1);
  setenv("HETCCL_NCCL_LIB", HETCCL_TEST_EMU_NCCL, 1);
  setenv("HETCCL_EMU_INIT_DELAY_MS", "30000", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto initCfg = fn<int (*)(Comm*, int, Id, int, void*)>("ncclCommInitRankConfig");
  auto asyncError = fn<int (*)(Comm, int*)>("ncclCommGetAsyncError");
  auto abort = fn<int (*)(Comm)>("ncclCommAbort");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
  } cfg = {sizeof(cfg), 0xcafebeef, 22809, 0};
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Comm c = nullptr;
  ASSERT_EQ(initCfg(&c, 1, id, 0, &cfg), 7) << lastError(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int e = -1;
  ASSERT_EQ(asyncError(c, &e), 0);
  EXPECT_EQ(e, 7) << "the vendor init is still running";
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(abort(c), 0) << lastError(nullptr);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 1.0) << "abort waited for the vendor's init";
  for (const char* v : {"HETCCL_DEVICE", "HETCCL_BACKEND", "HETCCL_NCCL_LIB", "HETCCL_EMU_INIT_DELAY_MS"}) unsetenv(v);
}

// Bad input that must be an error, never a crash: a config NCCL did not make
// given to ncclCommSplit, a handle that is no hetccl communicator (another
// library's, here the stand-in vendor's, or a destroyed one), a config from
// a newer NCCL.
TEST_F(DropIn, ForeignHandlesAndConfigsAreRefused) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto initCfg = fn<int (*)(Comm*, int, Id, int, void*)>("ncclCommInitRankConfig");
  auto split = fn<int (*)(Comm, int, int, Comm*, void*)>("ncclCommSplit");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Comm c = nullptr;
  ASSERT_EQ(init(&c, 1, id, 0), 0) << lastError(nullptr);
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
  } bad = {16 + 4, 0x1234, 22809, 1};
  Comm nc = reinterpret_cast<Comm>(1);
  EXPECT_EQ(split(c, 0, 0, &nc, &bad), 4);
  EXPECT_NE(std::string(lastError(c)).find("NCCL_CONFIG_INITIALIZER"), std::string::npos) << lastError(c);
  EXPECT_EQ(nc, nullptr);
  // The stand-in vendor library's own communicator, handed to the drop-in.
  void* vendor = dlopen(HETCCL_TEST_EMU_NCCL, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(vendor, nullptr) << dlerror();
  auto vendorGetId = reinterpret_cast<int (*)(Id*)>(dlsym(vendor, "ncclGetUniqueId"));
  auto vendorInit = reinterpret_cast<int (*)(Comm*, int, Id, int)>(dlsym(vendor, "ncclCommInitRank"));
  auto vendorAllReduce =
      reinterpret_cast<int (*)(const void*, void*, size_t, int, int, Comm, void*)>(dlsym(vendor, "ncclAllReduce"));
  Id sid;
  ASSERT_EQ(vendorGetId(&sid), 0);
  Comm foreign = nullptr;
  ASSERT_EQ(vendorInit(&foreign, 1, sid, 0), 0);
  float x = 1;
  EXPECT_EQ(allReduce(&x, &x, 1, 7, 0, foreign, nullptr), 5);
  EXPECT_NE(std::string(lastError(nullptr)).find("not a live communicator"), std::string::npos) << lastError(nullptr);
  // ... and the reverse: the vendor library refuses the drop-in's.
  EXPECT_EQ(vendorAllReduce(&x, &x, 1, 7, 0, c, nullptr), 5);
  auto vendorDestroy = reinterpret_cast<int (*)(Comm)>(dlsym(vendor, "ncclCommDestroy"));
  EXPECT_EQ(vendorDestroy(foreign), 0);
  // A config of a later NCCL: larger, another version; its head is read.
  struct {
    size_t size;
    unsigned magic, version;
    int blocking;
    char later[400];
  } newer = {sizeof(newer), 0xcafebeef, 23007, 1, {}};
  Id id2;
  ASSERT_EQ(getId(&id2), 0);
  Comm c2 = nullptr;
  EXPECT_EQ(initCfg(&c2, 1, id2, 0, &newer), 0) << lastError(nullptr);
  EXPECT_EQ(destroy(c2), 0);
  // The handle of a communicator just destroyed, right after a call on it
  // (the one the registry checks first), is refused like any other.
  EXPECT_EQ(allReduce(&x, &x, 1, 7, 0, c, nullptr), 0) << lastError(c);
  EXPECT_EQ(destroy(c), 0);
  EXPECT_EQ(allReduce(&x, &x, 1, 7, 0, c, nullptr), 5);
  EXPECT_NE(std::string(lastError(nullptr)).find("not a live communicator"), std::string::npos) << lastError(nullptr);
  unsetenv("HETCCL_DEVICE");
}

}  // namespace
