// core/: the HETCCL_* registry, data types and ops, the logger's switches.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <atomic>
#include <thread>
#include <vector>
#include <mutex>
#include <set>
#include <string>

#include "core/clock.h"
#include "core/config.h"
#include "core/settings.h"
#include "core/datatype.h"
#include "core/error.h"
#include "core/log.h"
#include "comm/proxy.h"
#include "core/workers.h"
#include "unit_util.h"

namespace hetccl {
namespace {

using test::EnvGuard;

// ---- config registry ----

// The value a spec's own type reads (throws as the typed handles do).
std::string readAsTyped(const VarSpec& v) {
  switch (v.type) {
    case VarType::kString: return StringSetting(v.name).get();
    case VarType::kInt: return std::to_string(IntSetting(v.name).get());
    case VarType::kBytes: return std::to_string(BytesSetting(v.name).get());
    case VarType::kBool: return BoolSetting(v.name).get() ? "1" : "0";
    case VarType::kChoice: return ChoiceSetting(v.name).get();
  }
  return "";
}

TEST(Config, EveryVariableIsDeclaredOnceWithTypeDefaultAllowedValuesAndHelp) {
  std::set<std::string> names;
  for (const VarSpec& v : config().vars()) {
    ASSERT_NE(v.name, nullptr);
    EXPECT_EQ(std::string(v.name).rfind("HETCCL_", 0), 0u) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << "declared twice: " << v.name;
    ASSERT_NE(v.defaultValue, nullptr) << v.name;
    ASSERT_NE(v.help, nullptr) << v.name;
    EXPECT_GT(strlen(v.help), 0u) << v.name;
    if (v.type == VarType::kInt || v.type == VarType::kBytes) {
      EXPECT_LT(v.min, v.max) << v.name << ": no range";
    }
    if (v.type == VarType::kChoice) {
      EXPECT_NE(v.choices, nullptr) << v.name;
    }
    // Every default is allowed by its own entry.
    EnvGuard unset(v.name, nullptr), noFallback(v.fallback ? v.fallback : "HETCCL_UNUSED_FALLBACK", nullptr);
    EXPECT_NO_THROW(readAsTyped(v)) << v.name;
  }
}

// Each handle of settings.h names an entry of the table of its own type.
TEST(Config, EveryHandleReadsItsEntry) {
  using namespace settings;
  for (const StringSetting& s : {kDebugSubsys, kCommId, kJobSecret, kSocketIfname, kGroup, kGroupMap, kCudaLib, kHipLib,
                                 kNcclLib, kRcclLib, kUcxLib, kKernelsLib, settings::kTransport, kNetPlugin})
    EXPECT_NO_THROW(s.get()) << s.name;
  for (const IntSetting& s : {kTimeoutS, kHostThreads, kSpinUs, kNetPluginAbi}) EXPECT_NO_THROW(s.get()) << s.name;
  for (const BytesSetting& s : {kBuffSize, kShmSlotBytes, kShmMax, kSocketBuffer, kUcxRmaMin, kChunkBytes, kSmallBytes,
                                kGpuBorderMin, kGpuBorderChunk, kStagingMax, kDeviceScratchMax})
    EXPECT_NO_THROW(s.get()) << s.name;
  for (const BoolSetting& s : {kShmCma, kCheckMismatch, kPlanFolds}) EXPECT_NO_THROW(s.get()) << s.name;
  for (const ChoiceSetting& s : {kDebug, settings::kDevice, settings::kBackend, kGpuBorder, kGpuBorderKernel})
    EXPECT_NO_THROW(s.get()) << s.name;
  EXPECT_HETCCL_ERROR(IntSetting("HETCCL_TRANSPORT").get(), hetcclInternalError, "wrong type");
}

TEST(Config, DefaultsWhenUnset) {
  EnvGuard a("HETCCL_TIMEOUT_S", nullptr), b("HETCCL_BUFFSIZE", nullptr), c("HETCCL_TRANSPORT", nullptr),
      d("HETCCL_DEBUG_SUBSYS", nullptr);
  EXPECT_EQ(settings::kTimeoutS.get(), 300);
  EXPECT_EQ(settings::kBuffSize.get(), 4u << 20);
  EXPECT_EQ(settings::kTransport.get(), "auto");
  EXPECT_EQ(settings::kDebugSubsys.get(), "ALL");
  EXPECT_FALSE(settings::kTimeoutS.isSet());
}

TEST(Config, EnvironmentOverridesDefault) {
  EnvGuard a("HETCCL_TIMEOUT_S", "17"), b("HETCCL_BUFFSIZE", "3M"), c("HETCCL_DEVICE", "CUDA");
  EXPECT_EQ(settings::kTimeoutS.get(), 17);
  EXPECT_EQ(settings::kBuffSize.get(), 3u << 20);
  EXPECT_EQ(settings::kDevice.get(), "cuda") << "choices match in any case, read as the table spells them";
  EXPECT_TRUE(settings::kTimeoutS.isSet());
}

TEST(Config, EmptyValueCountsAsUnset) {
  EnvGuard a("HETCCL_TIMEOUT_S", "");
  EXPECT_FALSE(settings::kTimeoutS.isSet());
  EXPECT_EQ(settings::kTimeoutS.get(), 300);
}

TEST(Config, NcclDebugIsTheFallbackOfHetcclDebug) {
  EnvGuard a("HETCCL_DEBUG", nullptr), b("NCCL_DEBUG", "INFO");
  EXPECT_EQ(settings::kDebug.get(), "INFO");
  EXPECT_TRUE(settings::kDebug.isSet());
  {
    EnvGuard c("HETCCL_DEBUG", "TRACE");  // the hetccl name wins
    EXPECT_EQ(settings::kDebug.get(), "TRACE");
  }
  EnvGuard d("NCCL_DEBUG", nullptr);
  EXPECT_EQ(settings::kDebug.get(), "");
  EXPECT_FALSE(settings::kDebug.isSet());
}

TEST(Config, FallbackIsOnlyForDeclaredPairs) {
  // NCCL_TIMEOUT_S is no fallback of anything: it must not leak in.
  EnvGuard a("HETCCL_TIMEOUT_S", nullptr), b("NCCL_TIMEOUT_S", "5");
  EXPECT_EQ(settings::kTimeoutS.get(), 300);
}

// What the table does not allow is refused, naming the variable, the value
// and what is allowed: nothing is clamped in silence.
TEST(Config, ValuesOutsideTheTableAreRefusedNamingWhatIsAllowed) {
  struct Bad {
    const char* name;
    const char* value;
    const char* says;
  } bad[] = {{"HETCCL_TIMEOUT_S", "12x", "an integer from 1 to 31536000"},
             {"HETCCL_TIMEOUT_S", "10000000000", "an integer from 1 to 31536000"},
             {"HETCCL_TIMEOUT_S", "0", "an integer from 1 to 31536000"},
             {"HETCCL_SHM_SLOT_BYTES", "1", "a size from 4096"},
             {"HETCCL_SHM_SLOT_BYTES", "1G", "a size from 4096"},
             {"HETCCL_HOST_THREADS", "1000", "an integer from 0 to 64"},
             {"HETCCL_BUFFSIZE", "5G", "a size from 4096"},
             {"HETCCL_DEVICE", "gpu", "one of host, cuda, hip"},
             {"HETCCL_GPU_BORDER", "yes", "one of auto, 0, 1"},
             {"HETCCL_SHM_CMA", "maybe", "1 or 0"}};
  for (const Bad& b : bad) {
    EnvGuard e(b.name, b.value);
    const VarSpec& v = config().spec(b.name);
    auto err = test::catchError([&] { readAsTyped(v); });
    ASSERT_TRUE(err.has_value()) << b.name << "=" << b.value << " was accepted";
    EXPECT_EQ(err->code(), hetcclInvalidArgument);
    std::string m = err->what();
    EXPECT_NE(m.find(b.name), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("'") + b.value + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(b.says), std::string::npos) << m;
  }
}

TEST(Config, BoolSpellings) {
  for (const char* f : {"0", "false", "FALSE", "no", "No", "off"}) {
    EnvGuard a("HETCCL_SHM_CMA", f);
    EXPECT_FALSE(settings::kShmCma.get()) << f;
  }
  for (const char* t : {"1", "yes", "true", "on", "ON"}) {
    EnvGuard a("HETCCL_SHM_CMA", t);
    EXPECT_TRUE(settings::kShmCma.get()) << t;
  }
}

TEST(Config, UnknownNameIsInternalError) {
  EXPECT_HETCCL_ERROR(StringSetting("HETCCL_NO_SUCH_THING").get(), hetcclInternalError, "HETCCL_NO_SUCH_THING");
  EXPECT_HETCCL_ERROR(IntSetting("NOT_DECLARED").get(), hetcclInternalError, "NOT_DECLARED");
  EXPECT_HETCCL_ERROR(config().isSet("HETCCL_DEBUGX"), hetcclInternalError, "HETCCL_DEBUGX");
}

// A variable hetccl no longer reads is out of the table, and a job that
// still sets it is told so, with why (a warning at init), not ignored.
TEST(Config, RetiredVariablesAreNamedWithWhyWhenSet) {
  std::set<std::string> live;
  for (const VarSpec& v : config().vars()) live.insert(v.name);
  ASSERT_FALSE(retiredSettings().empty());
  for (const RetiredVar& r : retiredSettings()) {
    EXPECT_EQ(live.count(r.name), 0u) << r.name << " is both live and retired";
    EXPECT_GT(strlen(r.why), 20u) << r.name;
    EnvGuard unset(r.name, nullptr);
    for (const std::string& w : retiredSettingsInEnvironment()) EXPECT_EQ(w.find(r.name), std::string::npos) << w;
  }
  EnvGuard set("HETCCL_GPU_DIRECT", "1");
  const std::vector<std::string> w = retiredSettingsInEnvironment();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("HETCCL_GPU_DIRECT=1 is set but no longer read: ", 0), 0u) << w[0];
  EXPECT_NE(w[0].find("HETCCL_GPU_BORDER"), std::string::npos) << w[0];
}

TEST(ParseBytes, PlainAndSuffixes) {
  EXPECT_EQ(parseBytes("0", "x"), 0u);
  EXPECT_EQ(parseBytes("123", "x"), 123u);
  EXPECT_EQ(parseBytes("4K", "x"), 4096u);
  EXPECT_EQ(parseBytes("4k", "x"), 4096u);
  EXPECT_EQ(parseBytes("2M", "x"), 2u << 20);
  EXPECT_EQ(parseBytes("2m", "x"), 2u << 20);
  EXPECT_EQ(parseBytes("1G", "x"), 1u << 30);
  EXPECT_EQ(parseBytes("3g", "x"), 3ull << 30);
  EXPECT_EQ(parseBytes("5KB", "x"), 5u << 10);
  EXPECT_EQ(parseBytes("7B", "x"), 7u);
  EXPECT_EQ(parseBytes("16777216G", "x"), 1ull << 54);
}

TEST(ParseBytes, GarbageIsInvalidArgumentNamingTheSetting) {
  for (const char* bad :
       {"", "abc", "12Q", "1.5M", "-1", "-4K", "4KK", "4 K", "4K ", "0x10", "99999999999999999999", "17179869184G"}) {
    SCOPED_TRACE(std::string("input '") + bad + "'");
    EXPECT_HETCCL_ERROR(parseBytes(bad, "HETCCL_BUFFSIZE"), hetcclInvalidArgument, "HETCCL_BUFFSIZE");
  }
  EnvGuard a("HETCCL_BUFFSIZE", "lots");
  EXPECT_HETCCL_ERROR(settings::kBuffSize.get(), hetcclInvalidArgument, "lots");
}

// A suffix alone, or a sign hidden behind blanks, is no size either.
TEST(ParseBytes, SuffixWithoutDigitsOrHiddenSignIsGarbage) {
  for (const char* bad : {"K", "M", "B", "KB", " -1", "\t-2K"}) {
    SCOPED_TRACE(std::string("input '") + bad + "'");
    EXPECT_HETCCL_ERROR(parseBytes(bad, "HETCCL_BUFFSIZE"), hetcclInvalidArgument, "HETCCL_BUFFSIZE");
  }
}

TEST(ParseInt, ValuesAndGarbage) {
  EXPECT_EQ(parseInt("42", "x"), 42);
  EXPECT_EQ(parseInt("-7", "x"), -7);
  for (const char* bad : {"", "4.2", "x", "1 ", "99999999999999999999"})
    EXPECT_HETCCL_ERROR(parseInt(bad, "what"), hetcclInvalidArgument, "what");
}

// ---- data types and ops ----

TEST(DataType, SizesNamesAndFloatness) {
  struct Row {
    DataType dt;
    size_t size;
    const char* name;
    bool isFloat;
  };
  const Row rows[] = {{hetcclInt8, 1, "int8", false},          {hetcclUint8, 1, "uint8", false},
                      {hetcclInt32, 4, "int32", false},        {hetcclUint32, 4, "uint32", false},
                      {hetcclInt64, 8, "int64", false},        {hetcclUint64, 8, "uint64", false},
                      {hetcclFloat16, 2, "half", true},        {hetcclFloat32, 4, "float", true},
                      {hetcclFloat64, 8, "double", true},      {hetcclBfloat16, 2, "bfloat16", true},
                      {hetcclFloat8e4m3, 1, "fp8_e4m3", true}, {hetcclFloat8e5m2, 1, "fp8_e5m2", true}};
  ASSERT_EQ(std::size(rows), static_cast<size_t>(hetcclNumTypes));
  for (const Row& r : rows) {
    EXPECT_TRUE(dataTypeValid(r.dt));
    EXPECT_EQ(dataTypeSize(r.dt), r.size) << r.name;
    EXPECT_STREQ(dataTypeName(r.dt), r.name);
    EXPECT_EQ(dataTypeIsFloat(r.dt), r.isFloat) << r.name;
  }
  for (int bad : {-1, static_cast<int>(hetcclNumTypes), 1000}) {
    EXPECT_FALSE(dataTypeValid(bad));
    EXPECT_EQ(dataTypeSize(static_cast<DataType>(bad)), 0u);
    EXPECT_STREQ(dataTypeName(static_cast<DataType>(bad)), "invalid");
    EXPECT_FALSE(dataTypeIsFloat(static_cast<DataType>(bad)));
  }
}

TEST(DataType, ParseNamesAndAliases) {
  const std::pair<const char*, DataType> ok[] = {
      {"int8", hetcclInt8},           {"uint8", hetcclUint8},     {"int32", hetcclInt32},
      {"uint32", hetcclUint32},       {"int64", hetcclInt64},     {"uint64", hetcclUint64},
      {"half", hetcclFloat16},        {"float16", hetcclFloat16}, {"float", hetcclFloat32},
      {"float32", hetcclFloat32},     {"double", hetcclFloat64},  {"float64", hetcclFloat64},
      {"bfloat16", hetcclBfloat16},   {"bf16", hetcclBfloat16},   {"fp8_e4m3", hetcclFloat8e4m3},
      {"fp8_e5m2", hetcclFloat8e5m2}, {"FLOAT", hetcclFloat32},   {"Int64", hetcclInt64}};
  for (auto [name, want] : ok) {
    DataType dt = hetcclInt8;
    if (want == hetcclInt8) dt = hetcclDouble;
    EXPECT_TRUE(parseDataType(name, &dt)) << name;
    EXPECT_EQ(dt, want) << name;
  }
  for (int i = 0; i < hetcclNumTypes; ++i) {  // names round-trip
    DataType dt;
    ASSERT_TRUE(parseDataType(dataTypeName(static_cast<DataType>(i)), &dt));
    EXPECT_EQ(dt, i);
  }
  for (const char* bad : {"", "int16", "float128", "fp8", "int8 "}) {
    DataType dt = hetcclUint64;
    EXPECT_FALSE(parseDataType(bad, &dt)) << bad;
    EXPECT_EQ(dt, hetcclUint64) << "unchanged on failure";
  }
}

TEST(DataType, RedOpNamesAndParse) {
  EXPECT_STREQ(redOpName(hetcclSum), "sum");
  EXPECT_STREQ(redOpName(hetcclProd), "prod");
  EXPECT_STREQ(redOpName(hetcclMax), "max");
  EXPECT_STREQ(redOpName(hetcclMin), "min");
  EXPECT_STREQ(redOpName(hetcclAvg), "avg");
  EXPECT_STREQ(redOpName(static_cast<hetcclRedOp_t>(hetcclNumOps + 3)), "premulsum");
  EXPECT_STREQ(redKindName(RedKind::kMax), "max");
  for (int i = 0; i < hetcclNumOps; ++i) {
    hetcclRedOp_t op;
    ASSERT_TRUE(parseRedOp(redOpName(static_cast<hetcclRedOp_t>(i)), &op));
    EXPECT_EQ(op, i);
  }
  hetcclRedOp_t op;
  EXPECT_TRUE(parseRedOp("SUM", &op));
  EXPECT_EQ(op, hetcclSum);
  EXPECT_FALSE(parseRedOp("premulsum", &op));
  EXPECT_FALSE(parseRedOp("xor", &op));
}

TEST(Error, CarriesCodeAndMessage) {
  EXPECT_HETCCL_ERROR(throwError(hetcclRemoteError, "rank 3 left"), hetcclRemoteError, "rank 3 left");
  EXPECT_HETCCL_ERROR(throwSystemError("open /x", ENOENT), hetcclSystemError, "open /x: No such file");
  EXPECT_HETCCL_ERROR(HETCCL_CHECK_ARG(1 == 2, "bad arg"), hetcclInvalidArgument, "bad arg");
  EXPECT_HETCCL_ERROR(HETCCL_CHECK_USAGE(false, "bad use"), hetcclInvalidUsage, "bad use");
  EXPECT_NO_THROW(HETCCL_CHECK_ARG(true, "never"));
}

// ---- log switches ----

class Log : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("HETCCL_DEBUG");
    unsetenv("NCCL_DEBUG");
    unsetenv("HETCCL_DEBUG_SUBSYS");
    logReset();
  }
  EnvGuard keepDebug_{"HETCCL_DEBUG", nullptr}, keepNccl_{"NCCL_DEBUG", nullptr},
      keepSubsys_{"HETCCL_DEBUG_SUBSYS", nullptr};
};

TEST_F(Log, SilentWhenUnset) {
  logReset();
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kInit));
  EXPECT_FALSE(logEnabled(LogLevel::kTrace, kAll));
}

TEST_F(Log, LevelsAreCumulative) {
  // A level the registry refuses logs warnings (and says why once on stderr).
  const std::pair<const char*, int> levels[] = {{"WARN", 1}, {"info", 2}, {"TRACE", 3}, {"bogus", 1}};
  for (auto [spec, level] : levels) {
    setenv("HETCCL_DEBUG", spec, 1);
    logReset();
    EXPECT_EQ(logEnabled(LogLevel::kWarn, kColl), level >= 1) << spec;
    EXPECT_EQ(logEnabled(LogLevel::kInfo, kColl), level >= 2) << spec;
    EXPECT_EQ(logEnabled(LogLevel::kTrace, kColl), level >= 3) << spec;
  }
}

TEST_F(Log, NcclDebugIsReadWhenHetcclDebugIsUnset) {
  setenv("NCCL_DEBUG", "INFO", 1);
  logReset();
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kTransport));
  EXPECT_FALSE(logEnabled(LogLevel::kTrace, kTransport));
  setenv("HETCCL_DEBUG", "WARN", 1);  // the hetccl name wins
  logReset();
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kTransport));
  EXPECT_TRUE(logEnabled(LogLevel::kWarn, kTransport));
}

TEST_F(Log, SubsystemMask) {
  setenv("HETCCL_DEBUG", "TRACE", 1);
  setenv("HETCCL_DEBUG_SUBSYS", "INIT,coll", 1);
  logReset();
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kInit));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kColl));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kTransport));
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kBootstrap));

  setenv("HETCCL_DEBUG_SUBSYS", "^TRANSPORT,BOOTSTRAP", 1);
  logReset();
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kTransport));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kBootstrap));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kColl));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kDevice));

  setenv("HETCCL_DEBUG_SUBSYS", "ALL", 1);
  logReset();
  for (unsigned s : {kInit, kBootstrap, kTopo, kTransport, kBackend, kColl, kDevice})
    EXPECT_TRUE(logEnabled(LogLevel::kTrace, s)) << s;

  setenv("HETCCL_DEBUG", "", 1);  // level off: the mask does not matter
  logReset();
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kInit));
}

TEST_F(Log, MessageGoesToStderrWithLevelAndSubsystem) {
  setenv("HETCCL_DEBUG", "INFO", 1);
  logReset();
  logSetRank(5);
  testing::internal::CaptureStderr();
  LOG_INFO(kTopo, "hello %d", 42);
  LOG_TRACE(kTopo, "not shown %d", 1);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(test::contains(out, "INFO TOPO hello 42")) << out;
  EXPECT_TRUE(test::contains(out, ":5 hetccl")) << out;
  EXPECT_FALSE(test::contains(out, "not shown")) << out;
  logSetRank(-1);
}

// ---- Proxy: order, sticky failure, and `finally` on every path ----

TEST(Proxy, FinallyRunsAfterSuccessFailureAndDroppedJobs) {
  std::vector<std::string> seen;
  std::mutex mu;
  auto note = [&](const std::string& s) {
    std::lock_guard<std::mutex> g(mu);
    seen.push_back(s);
  };
  {
    Proxy p;
    p.submit([&] { note("run1"); }, [&] { note("fin1"); });
    p.submit([&] { throwError(hetcclRemoteError, "peer 3 went silent"); }, [&] { note("fin2"); });
    p.submit([&] { note("run3"); }, [&] { note("fin3"); });  // dropped after the failure
    p.drain();
    EXPECT_EQ(p.status(), hetcclRemoteError);
    EXPECT_NE(p.errorText().find("peer 3 went silent"), std::string::npos);
  }
  std::vector<std::string> want = {"run1", "fin1", "fin2", "fin3"};
  EXPECT_EQ(seen, want);
}

TEST(Proxy, StopRunsWhatIsQueued) {
  std::atomic<int> fins{0};
  {
    Proxy p;
    for (int i = 0; i < 50; ++i) p.submit([] {}, [&] { ++fins; });
    p.stop();
    EXPECT_EQ(fins.load(), 50);
    p.stop();  // twice is harmless
  }
  EXPECT_EQ(fins.load(), 50);
}

// ---- helper threads: every part once, errors rethrown, no deadlock ----

TEST(Workers, EveryPartRunsExactlyOnceOnSeveralThreads) {
  for (int n : {1, 2, 3, 7, 16, 40}) {
    std::vector<std::atomic<int>> hits(n);
    std::mutex mu;
    std::set<std::thread::id> threads;
    runParts(n, [&](int p) {
      ++hits[p];
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let helpers claim some
      std::lock_guard<std::mutex> g(mu);
      threads.insert(std::this_thread::get_id());
    });
    for (int p = 0; p < n; ++p) EXPECT_EQ(hits[p].load(), 1) << "part " << p << " of " << n;
    if (n == 40) {  // 80 ms of parts: a helper has long woken up
      EXPECT_GE(threads.size(), 2u) << n << " parts ran on one thread";
    }
  }
  runParts(0, [](int) { FAIL() << "no part expected"; });
}

TEST(Workers, FirstErrorIsRethrownAfterAllPartsRan) {
  std::atomic<int> ran{0};
  try {
    runParts(8, [&](int p) {
      ++ran;
      if (p == 3 || p == 5) throwError(hetcclRemoteError, "part " + std::to_string(p) + " failed");
    });
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), hetcclRemoteError);
    EXPECT_TRUE(test::contains(e.what(), "failed")) << e.what();
  }
  EXPECT_EQ(ran.load(), 8);
  // The pool still works after a failed job.
  std::atomic<int> after{0};
  runParts(5, [&](int) { ++after; });
  EXPECT_EQ(after.load(), 5);
}

TEST(Workers, ConcurrentAndNestedJobsFinish) {
  // Two threads submit at once (one runs inline while the other holds the
  // pool), and parts that submit jobs themselves run them inline.
  std::atomic<long> sum{0};
  auto job = [&] {
    for (int rep = 0; rep < 50; ++rep) runParts(6, [&](int p) { runParts(3, [&](int q) { sum += p * 3 + q + 1; }); });
  };
  std::thread a(job), b(job);
  a.join();
  b.join();
  EXPECT_EQ(sum.load(), 2L * 50 * (18 * 19 / 2));
}

#if defined(__SANITIZE_THREAD__)
#define HETCCL_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HETCCL_TEST_TSAN 1
#endif
#endif

TEST(Workers, ForkedChildGetsItsOwnPool) {
#ifdef HETCCL_TEST_TSAN
  GTEST_SKIP() << "ThreadSanitizer cannot start threads in a child forked from a threaded process "
                  "(it runs in the plain and ASan builds)";
#endif
  runParts(4, [](int) {});  // the parent's pool has started
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> n{0};
    runParts(6, [&](int) { ++n; });
    _exit(n.load() == 6 ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

TEST(Workers, ThreadCountFromSettingOrCores) {
  EnvGuard g("HETCCL_HOST_THREADS", "5");
  EXPECT_EQ(hostThreadsFor(4), 5);
  setenv("HETCCL_HOST_THREADS", "0", 1);
  int one = hostThreadsFor(1), many = hostThreadsFor(1000);
  EXPECT_GE(one, 1);
  EXPECT_LE(one, 8);
  EXPECT_EQ(many, 1);
  setenv("HETCCL_HOST_THREADS", "lots", 1);
  EXPECT_THROW(hostThreadsFor(1), Error);
}

}  // namespace
}  // namespace hetccl

// The cheap clock stays on the steady clock's scale: over 300 ms of reads
// (six of its 50 ms re-anchorings where it reads the TSC) it never strays
// from std::chrono::steady_clock by more than 50 us, and consecutive reads
// of one thread never go back by more than a few microseconds.
TEST(Clock, FollowsTheSteadyClock) {
  const std::string src = hetccl::clockSource();
  EXPECT_TRUE(src == "tsc" || src == "steady") << src;
  auto chronoUs = [] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const double end = chronoUs() + 300000;
  double prev = hetccl::clockUs(), worst = 0, back = 0;
  while (chronoUs() < end) {
    const double a = chronoUs(), c = hetccl::clockUs(), b = chronoUs();
    if (b - a < 20) worst = std::max(worst, std::max(a - c, c - b));  // outside [a, b]
    back = std::max(back, prev - c);
    prev = c;
  }
  EXPECT_LT(worst, 50.0) << src;
  EXPECT_LT(back, 5.0) << src;
}

// Threads reading while the anchor moves all see the steady clock's time.
TEST(Clock, ThreadsReadingTogetherSeeOneClock) {
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&bad] {
      for (int i = 0; i < 20000; ++i) {
        const double a =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
        const double c = hetccl::clockUs();
        if (c < a - 50 || c > a + 100000) bad.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}
