// The drop-in's Parameter API (NCCL 2.30's ncclParam*), loaded by path as a
// program built for NCCL 2.30 would call it: HETCCL_* keys read as hetccl
// reads them (set here through the environment), each typed getter's range
// error, text and raw copies, an unknown key, a buffer too small, the key
// list and the dump; and a key of the vendor library's where that library
// (here the emulated GPU's group library, of NCCL 2.28.9's API) has no
// Parameter API; and keys forwarded to one that has it (vendor_param_nccl.c
// stands in for NCCL 2.30: none is installed here, and no real NCCL's own
// parameters are read by these tests).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

namespace {

using Handle = void*;
constexpr int kSuccess = 0, kInvalidArgument = 4, kInvalidUsage = 5;

class DropInParam : public ::testing::Test {
 protected:
  // The vendor library, chosen at the drop-in's first use of it (once per
  // process: ctest runs each test in its own).
  virtual const char* vendorLib() const { return HETCCL_TEST_EMU_NCCL; }
  void SetUp() override {
    setenv("HETCCL_NCCL_LIB", vendorLib(), 1);
    if (void* earlier = dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_NOLOAD)) {
      loadedEarlier_ = true;
      dlclose(earlier);
    }
    lib_ = dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    bind_ = fn<int (*)(Handle*, const char*)>("ncclParamBind");
    lastError_ = fn<const char* (*)(void*)>("ncclGetLastError");
  }
  void TearDown() override {
    for (const char* v : {"HETCCL_NCCL_LIB", "HETCCL_TIMEOUT_S", "HETCCL_BUFFSIZE", "HETCCL_SHM_CMA",
                          "HETCCL_TRANSPORT", "HETCCL_ENCRYPT", "HETCCL_STAGING_MAX"})
      unsetenv(v);
  }
  template <typename F>
  F fn(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  Handle bound(const char* key) {
    Handle h = nullptr;
    EXPECT_EQ(bind_(&h, key), kSuccess) << key << ": " << lastError();
    EXPECT_NE(h, nullptr) << key;
    return h;
  }
  std::string lastError() {
    const char* e = lastError_(nullptr);
    return e ? e : "";
  }
  template <typename T>
  int get(const char* getter, Handle h, T* out) {
    return fn<int (*)(Handle, T*)>(getter)(h, out);
  }
  // Whether an earlier test of this process loaded the drop-in, which may
  // then have chosen another vendor library (the whole binary run at once;
  // ctest runs each test alone, where this is never so).
  bool vendorMayBeChosen() const { return loadedEarlier_; }
  bool loadedEarlier_ = false;
  void* lib_ = nullptr;
  int (*bind_)(Handle*, const char*) = nullptr;
  const char* (*lastError_)(void*) = nullptr;
};

// NCCL 2.30's names, which the installed nccl.h (2.28.9) lacks, each with
// its pnccl* twin (test_dropin.cc checks the rest of exports.txt).
TEST_F(DropInParam, ExportsTheParameterApiWithItsTwins) {
  const char* const names[] = {"ncclParamBind",
                               "ncclParamGetI8",
                               "ncclParamGetI16",
                               "ncclParamGetI32",
                               "ncclParamGetI64",
                               "ncclParamGetU8",
                               "ncclParamGetU16",
                               "ncclParamGetU32",
                               "ncclParamGetU64",
                               "ncclParamGetStr",
                               "ncclParamGet",
                               "ncclParamGetParameter",
                               "ncclParamGetAllParameterKeys",
                               "ncclParamDumpAll"};
  for (const char* n : names) {
    EXPECT_NE(dlsym(lib_, n), nullptr) << n;
    EXPECT_EQ(dlsym(lib_, (std::string("p") + n).c_str()), dlsym(lib_, n)) << "p" << n << " is not " << n << "'s twin";
  }
}

TEST_F(DropInParam, HetcclKeysThroughEveryCall) {
  setenv("HETCCL_TIMEOUT_S", "120", 1);  // integer
  setenv("HETCCL_BUFFSIZE", "8M", 1);    // size
  setenv("HETCCL_SHM_CMA", "off", 1);    // boolean
  setenv("HETCCL_TRANSPORT", "tcp", 1);  // text
  setenv("HETCCL_ENCRYPT", "ALL", 1);    // choice, as the table spells it

  Handle timeout = bound("HETCCL_TIMEOUT_S");
  EXPECT_EQ(bound("HETCCL_TIMEOUT_S"), timeout) << "a key binds to one handle";
  int8_t i8 = 0;
  int16_t i16 = 0;
  int32_t i32 = 0;
  int64_t i64 = 0;
  uint8_t u8 = 0;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  EXPECT_EQ(get("ncclParamGetI8", timeout, &i8), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetI16", timeout, &i16), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetI32", timeout, &i32), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetI64", timeout, &i64), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetU8", timeout, &u8), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetU16", timeout, &u16), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetU32", timeout, &u32), kSuccess) << lastError();
  EXPECT_EQ(get("pncclParamGetU64", timeout, &u64), kSuccess) << lastError();
  EXPECT_EQ(i8, 120);
  EXPECT_EQ(i16, 120);
  EXPECT_EQ(i32, 120);
  EXPECT_EQ(i64, 120);
  EXPECT_EQ(u8, 120);
  EXPECT_EQ(u16, 120);
  EXPECT_EQ(u32, 120u);
  EXPECT_EQ(u64, 120u);

  // The value is read at each call, as hetccl reads its settings.
  setenv("HETCCL_TIMEOUT_S", "121", 1);
  EXPECT_EQ(get("ncclParamGetI32", timeout, &i32), kSuccess) << lastError();
  EXPECT_EQ(i32, 121);

  Handle buff = bound("HETCCL_BUFFSIZE");
  EXPECT_EQ(get("ncclParamGetU64", buff, &u64), kSuccess) << lastError();
  EXPECT_EQ(u64, 8u << 20);
  Handle cma = bound("HETCCL_SHM_CMA");
  u8 = 7;
  EXPECT_EQ(get("ncclParamGetU8", cma, &u8), kSuccess) << lastError();
  EXPECT_EQ(u8, 0);

  auto getStr = fn<int (*)(Handle, const char**)>("ncclParamGetStr");
  const char* text = nullptr;
  EXPECT_EQ(getStr(buff, &text), kSuccess) << lastError();
  EXPECT_STREQ(text, "8388608");
  EXPECT_EQ(getStr(bound("HETCCL_TRANSPORT"), &text), kSuccess) << lastError();
  EXPECT_STREQ(text, "tcp");

  auto getRaw = fn<int (*)(Handle, void*, int, int*)>("ncclParamGet");
  int64_t raw = 0;
  int len = -1;
  EXPECT_EQ(getRaw(timeout, &raw, sizeof raw, &len), kSuccess) << lastError();
  EXPECT_EQ(len, 8);
  EXPECT_EQ(raw, 121);
  char buf[16] = {};
  EXPECT_EQ(getRaw(bound("HETCCL_TRANSPORT"), buf, sizeof buf, &len), kSuccess) << lastError();
  EXPECT_EQ(len, 4);
  EXPECT_STREQ(buf, "tcp");

  auto getParameter = fn<int (*)(const char*, const char**, int*)>("ncclParamGetParameter");
  EXPECT_EQ(getParameter("HETCCL_ENCRYPT", &text, &len), kSuccess) << lastError();
  EXPECT_STREQ(text, "all");
  EXPECT_EQ(len, 3);
  EXPECT_EQ(getParameter("HETCCL_TIMEOUT_S", &text, &len), kSuccess) << lastError();
  EXPECT_STREQ(text, "121");
}

// A value that does not fit the type asked for is ncclInvalidArgument
// naming the key, the value and the type; nothing is written. No setting
// of the registry can exceed int64_t or be negative (the largest, a size,
// is at most 1 TiB), so ncclParamGetI64 and ncclParamGetU64 read the
// largest value instead.
TEST_F(DropInParam, EachTypedGetterRefusesAValueThatDoesNotFit) {
  setenv("HETCCL_TIMEOUT_S", "70000", 1);
  setenv("HETCCL_STAGING_MAX", "1024G", 1);  // its largest: 1 TiB
  Handle timeout = bound("HETCCL_TIMEOUT_S");
  Handle staging = bound("HETCCL_STAGING_MAX");
  auto refused = [&](int r, const char* type, const char* value) {
    EXPECT_EQ(r, kInvalidArgument) << type;
    const std::string e = lastError();
    EXPECT_NE(e.find(value), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("does not fit ") + type), std::string::npos) << e;
  };
  int8_t i8 = 5;
  int16_t i16 = 5;
  int32_t i32 = 5;
  uint8_t u8 = 5;
  uint16_t u16 = 5;
  uint32_t u32 = 5;
  refused(get("ncclParamGetI8", timeout, &i8), "int8_t", "HETCCL_TIMEOUT_S=70000");
  refused(get("ncclParamGetU8", timeout, &u8), "uint8_t", "HETCCL_TIMEOUT_S=70000");
  refused(get("ncclParamGetI16", timeout, &i16), "int16_t", "HETCCL_TIMEOUT_S=70000");
  refused(get("ncclParamGetU16", timeout, &u16), "uint16_t", "HETCCL_TIMEOUT_S=70000");
  refused(get("ncclParamGetI32", staging, &i32), "int32_t", "HETCCL_STAGING_MAX=1099511627776");
  refused(get("ncclParamGetU32", staging, &u32), "uint32_t", "HETCCL_STAGING_MAX=1099511627776");
  EXPECT_EQ(i8, 5);
  EXPECT_EQ(u32, 5u);
  int64_t i64 = 0;
  uint64_t u64 = 0;
  EXPECT_EQ(get("ncclParamGetI64", staging, &i64), kSuccess) << lastError();
  EXPECT_EQ(get("ncclParamGetU64", staging, &u64), kSuccess) << lastError();
  EXPECT_EQ(i64, int64_t{1} << 40);
  EXPECT_EQ(u64, uint64_t{1} << 40);

  // A text setting has no number; a value outside the table is the
  // registry's own error.
  setenv("HETCCL_TRANSPORT", "tcp", 1);
  EXPECT_EQ(get("ncclParamGetI32", bound("HETCCL_TRANSPORT"), &i32), kInvalidArgument);
  EXPECT_NE(lastError().find("HETCCL_TRANSPORT is a text setting"), std::string::npos) << lastError();
  setenv("HETCCL_TIMEOUT_S", "0", 1);
  EXPECT_EQ(get("ncclParamGetI32", timeout, &i32), kInvalidArgument);
  EXPECT_NE(lastError().find("HETCCL_TIMEOUT_S"), std::string::npos) << lastError();
}

TEST_F(DropInParam, UnknownKeyAndTooSmallBufferAreRefused) {
  Handle h = reinterpret_cast<Handle>(1);
  EXPECT_EQ(bind_(&h, "HETCCL_NO_SUCH_SETTING"), kInvalidArgument);
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(lastError().find("no hetccl setting is named HETCCL_NO_SUCH_SETTING"), std::string::npos) << lastError();
  const char* text = "x";
  int len = 9;
  auto getParameter = fn<int (*)(const char*, const char**, int*)>("ncclParamGetParameter");
  EXPECT_EQ(getParameter("HETCCL_NO_SUCH_SETTING", &text, &len), kInvalidArgument);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(len, 0);
  int32_t v = 0;
  int dummy = 0;
  EXPECT_EQ(get("ncclParamGetI32", reinterpret_cast<Handle>(&dummy), &v), kInvalidArgument);
  EXPECT_NE(lastError().find("not returned by ncclParamBind"), std::string::npos) << lastError();

  auto getRaw = fn<int (*)(Handle, void*, int, int*)>("ncclParamGet");
  char buf[8] = {};
  EXPECT_EQ(getRaw(bound("HETCCL_TIMEOUT_S"), buf, 4, &len), kInvalidArgument);
  EXPECT_EQ(len, 0);
  EXPECT_NE(lastError().find("HETCCL_TIMEOUT_S needs 8 bytes; maxLen is 4"), std::string::npos) << lastError();
  setenv("HETCCL_TRANSPORT", "tcp", 1);
  EXPECT_EQ(getRaw(bound("HETCCL_TRANSPORT"), buf, 3, &len), kInvalidArgument);
  EXPECT_NE(lastError().find("needs 4 bytes; maxLen is 3"), std::string::npos) << lastError();
}

// NCCL's rule for returned text: the calling thread's until its next call
// of the same function; another thread's calls leave it alone.
TEST_F(DropInParam, ReturnedTextBelongsToTheCallingThread) {
  setenv("HETCCL_TRANSPORT", "tcp", 1);
  setenv("HETCCL_BUFFSIZE", "8M", 1);
  auto getStr = fn<int (*)(Handle, const char**)>("ncclParamGetStr");
  Handle transport = bound("HETCCL_TRANSPORT"), buff = bound("HETCCL_BUFFSIZE");
  const char* mine = nullptr;
  ASSERT_EQ(getStr(transport, &mine), kSuccess) << lastError();
  std::string theirs;
  std::thread([&] {
    const char* t = nullptr;
    if (getStr(buff, &t) == kSuccess && t) theirs = t;
  }).join();
  EXPECT_EQ(theirs, "8388608");
  EXPECT_STREQ(mine, "tcp") << "another thread's call changed this thread's text";
  const char* next = nullptr;
  ASSERT_EQ(getStr(buff, &next), kSuccess) << lastError();
  EXPECT_STREQ(next, "8388608");
}

TEST_F(DropInParam, KeyListHoldsEveryHetcclSettingOnce) {
  if (vendorMayBeChosen()) GTEST_SKIP() << "the drop-in chose its vendor library in an earlier test";
  auto keys = fn<int (*)(const char***, int*)>("ncclParamGetAllParameterKeys");
  const char** table = nullptr;
  int n = 0;
  ASSERT_EQ(keys(&table, &n), kSuccess) << lastError();
  ASSERT_NE(table, nullptr);
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    ASSERT_NE(table[i], nullptr) << i;
    EXPECT_TRUE(seen.insert(table[i]).second) << table[i] << " listed twice";
    EXPECT_EQ(std::string(table[i]).rfind("HETCCL_", 0), 0u) << table[i] << ": the emulated library has no keys";
  }
  for (const char* k : {"HETCCL_TIMEOUT_S", "HETCCL_BUFFSIZE", "HETCCL_NET_PLUGIN_ABI", "HETCCL_NCCL_LIB"})
    EXPECT_TRUE(seen.count(k)) << k;
  EXPECT_GE(n, 50);
}

TEST_F(DropInParam, DumpPrintsHetcclSettingsThenSaysTheVendorHasNone) {
  if (vendorMayBeChosen()) GTEST_SKIP() << "the drop-in chose its vendor library in an earlier test";
  setenv("HETCCL_TIMEOUT_S", "77", 1);
  auto dump = fn<void (*)()>("ncclParamDumpAll");
  ::testing::internal::CaptureStdout();
  dump();
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("HETCCL_TIMEOUT_S=77\n"), std::string::npos) << out;
  EXPECT_NE(out.find("HETCCL_BUFFSIZE=4194304 (default)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("(the loaded NCCL, version 2.28.9, has no Parameter API)"), std::string::npos) << out;
  EXPECT_LT(out.find("HETCCL_TIMEOUT_S"), out.find("has no Parameter API")) << out;
}

// NCCL's own keys go to the vendor library; one of NCCL 2.28.9's API has
// no Parameter API, and the error says so with its version.
TEST_F(DropInParam, VendorKeyWithoutTheVendorsParameterApiIsInvalidUsage) {
  if (vendorMayBeChosen()) GTEST_SKIP() << "the drop-in chose its vendor library in an earlier test";
  Handle h = nullptr;
  EXPECT_EQ(bind_(&h, "NCCL_ALGO"), kInvalidUsage);
  std::string e = lastError();
  for (const char* part :
       {"NCCL_ALGO is not a hetccl setting", "version 2.28.9", "has no Parameter API", HETCCL_TEST_EMU_NCCL})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
  const char* text = nullptr;
  int len = 0;
  auto getParameter = fn<int (*)(const char*, const char**, int*)>("ncclParamGetParameter");
  EXPECT_EQ(getParameter("NCCL_PROTO", &text, &len), kInvalidUsage);
  e = lastError();
  EXPECT_NE(e.find("NCCL_PROTO is not a hetccl setting"), std::string::npos) << e;
  EXPECT_NE(e.find("has no Parameter API"), std::string::npos) << e;
}

class DropInParamVendor : public DropInParam {
 protected:
  const char* vendorLib() const override { return HETCCL_TEST_VENDOR_PARAM; }
};

TEST_F(DropInParamVendor, OtherKeysGoToTheVendorsParameterApi) {
  if (vendorMayBeChosen()) GTEST_SKIP() << "the drop-in chose its vendor library in an earlier test";
  setenv("HETCCL_TIMEOUT_S", "99", 1);
  Handle h = bound("NCCL_TEST_INT");
  int32_t i32 = 0;
  EXPECT_EQ(get("ncclParamGetI32", h, &i32), kSuccess) << lastError();
  EXPECT_EQ(i32, 42);
  // A getter the vendor library lacks, and one it refuses.
  int8_t i8 = 0;
  EXPECT_EQ(get("ncclParamGetI8", h, &i8), kInvalidUsage);
  EXPECT_NE(lastError().find("ncclParamGetI8 is not in the loaded NCCL"), std::string::npos) << lastError();
  const char* text = nullptr;
  auto getStr = fn<int (*)(Handle, const char**)>("ncclParamGetStr");
  EXPECT_EQ(getStr(h, &text), kInvalidArgument);
  EXPECT_NE(lastError().find("ncclParamGetStr in NCCL failed"), std::string::npos) << lastError();
  EXPECT_EQ(getStr(bound("NCCL_TEST_STR"), &text), kSuccess) << lastError();
  EXPECT_STREQ(text, "ring");
  int len = 0;
  auto getParameter = fn<int (*)(const char*, const char**, int*)>("ncclParamGetParameter");
  EXPECT_EQ(getParameter("NCCL_TEST_STR", &text, &len), kSuccess) << lastError();
  EXPECT_STREQ(text, "ring");
  EXPECT_EQ(len, 4);
  EXPECT_EQ(getParameter("HETCCL_TIMEOUT_S", &text, &len), kSuccess) << lastError();
  EXPECT_STREQ(text, "99");
  // The vendor's unknown key: its error and its last-error text.
  EXPECT_EQ(bind_(&h, "NCCL_NO_SUCH_PARAM"), kInvalidArgument);
  EXPECT_NE(lastError().find("the test vendor has no such parameter"), std::string::npos) << lastError();

  auto keys = fn<int (*)(const char***, int*)>("ncclParamGetAllParameterKeys");
  const char** table = nullptr;
  int n = 0;
  ASSERT_EQ(keys(&table, &n), kSuccess) << lastError();
  ASSERT_GE(n, 3);
  EXPECT_STREQ(table[n - 2], "NCCL_TEST_INT") << "the vendor's keys come after hetccl's";
  EXPECT_STREQ(table[n - 1], "NCCL_TEST_STR");
  EXPECT_STREQ(table[0], "HETCCL_DEBUG");

  ::testing::internal::CaptureStdout();
  fn<void (*)()>("ncclParamDumpAll")();
  const std::string out = ::testing::internal::GetCapturedStdout();
  const size_t ours = out.find("HETCCL_TIMEOUT_S=99\n"), theirs = out.find("vendor NCCL_TEST_INT=42\n");
  EXPECT_NE(ours, std::string::npos) << out;
  EXPECT_NE(theirs, std::string::npos) << out;
  EXPECT_LT(ours, theirs) << out;
  EXPECT_EQ(out.find("has no Parameter API"), std::string::npos) << out;
}

}  // namespace
