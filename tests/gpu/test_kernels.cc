// A device kernels plugin (libhetccl-cuda-kernels.so on an NVIDIA GPU,
// libhetccl-emu-kernels.so on the emulated GPU: the same source) against
// the host reference (src/elements/host_reduce.h), bit for bit, for every
// data type x op and a few counts, aligned (vector path) and misaligned
// (scalar path), in place and out of place; plus scale (floats) and divide
// (integers). HETCCL_TEST_DEVICE names the kind (default cuda); memory and
// copies go through hetccl's public device helpers, so no vendor header is
// needed. Without the runtime or a device every test skips.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "core/error.h"
#include "device/device.h"
#include "device/kernels_plugin.h"
#include "elements/host_reduce.h"
#include "elements/lowp.h"
#include "hetccl/hetccl.h"

namespace hetccl {
namespace {

struct Gpu {
  bool ok = false;
  std::string kind;
  std::string why;
  const hetcclKernelsApi_t* api = nullptr;
};

const Gpu& gpu() {
  static const Gpu g = [] {
    Gpu r;
    const char* kind = getenv("HETCCL_TEST_DEVICE");
    r.kind = kind && *kind ? kind : "cuda";
    int n = 0;
    if (hetcclDeviceCount(r.kind.c_str(), &n) != hetcclSuccess || n == 0) {
      r.why = "no " + r.kind + " device or runtime (" + hetcclGetLastError(nullptr) + ")";
      return r;
    }
#ifdef HETCCL_TEST_KERNELS_LIB
    // The CUDA plugin as built, unless the environment names another one.
    if (r.kind == "cuda" && !getenv("HETCCL_KERNELS_LIB")) setenv("HETCCL_KERNELS_LIB", HETCCL_TEST_KERNELS_LIB, 1);
#endif
    try {
      r.api = loadKernels(r.kind);
    } catch (const Error& e) {
      r.why = std::string("loading the plugin failed: ") + e.what();
      return r;
    }
    if (!r.api) {
      r.why = "no " + r.kind + " kernels plugin";
      return r;
    }
    r.ok = true;
    return r;
  }();
  return g;
}

#define NEED_GPU()                            \
  do {                                        \
    if (!gpu().ok) GTEST_SKIP() << gpu().why; \
  } while (0)

#define DEV_OK(call)                                                               \
  do {                                                                             \
    hetcclResult_t rc_ = (call);                                                   \
    ASSERT_EQ(rc_, hetcclSuccess) << #call << ": " << hetcclGetLastError(nullptr); \
  } while (0)

// Device memory, freed at scope end.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) {
    if (hetcclDeviceAlloc(gpu().kind.c_str(), &p, bytes ? bytes : 1) != hetcclSuccess) p = nullptr;
  }
  ~DevBuf() {
    if (p) hetcclDeviceFree(gpu().kind.c_str(), p);
  }
  char* c() const { return static_cast<char*>(p); }
};

// The default stream: where the kernels run when given a NULL stream.
hetcclResult_t syncDevice() { return hetcclStreamSynchronize(gpu().kind.c_str(), nullptr); }
hetcclResult_t copy(void* dst, const void* src, size_t bytes) {
  return hetcclDeviceCopy(gpu().kind.c_str(), dst, src, bytes);
}

const char* kOpNames[4] = {"sum", "prod", "max", "min"};

// Random elements: for floats a mix of arbitrary bit patterns (NaN, inf,
// subnormals) and ordinary values of a moderate range (rounding, overflow of
// the narrow types); integers: arbitrary bits.
std::vector<uint8_t> randomElems(DataType dt, size_t n, uint64_t seed) {
  size_t es = dataTypeSize(dt);
  std::vector<uint8_t> v(n * es);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    uint8_t* p = v.data() + i * es;
    if (!dataTypeIsFloat(dt) || (bits & 7) == 0) {  // one float in 8: raw bits
      memcpy(p, &bits, es);
      continue;
    }
    double x = std::ldexp(static_cast<double>(static_cast<int64_t>(bits >> 11) % 2000001 - 1000000) / 1e6,
                          static_cast<int>(rng() % 24) - 12);
    switch (dt) {
      case hetcclFloat16: {
        uint16_t h = floatToHalf(static_cast<float>(x));
        memcpy(p, &h, 2);
        break;
      }
      case hetcclBfloat16: {
        uint16_t h = floatToBf16(static_cast<float>(x));
        memcpy(p, &h, 2);
        break;
      }
      case hetcclFloat32: {
        float f = static_cast<float>(x);
        memcpy(p, &f, 4);
        break;
      }
      case hetcclFloat64: memcpy(p, &x, 8); break;
      case hetcclFloat8e4m3: *p = floatToFp8e4m3(static_cast<float>(x)); break;
      case hetcclFloat8e5m2: *p = floatToFp8e5m2(static_cast<float>(x)); break;
      default: break;
    }
  }
  return v;
}

// Bit-exact comparison; where `nanEqual`, two NaNs count as equal whatever
// their sign and payload (NaNs that arithmetic creates differ between x86
// and GPUs). Reports the first few differences.
void expectSame(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, DataType dt, bool nanEqual,
                const std::string& what) {
  size_t es = dataTypeSize(dt);
  ASSERT_EQ(want.size(), got.size());
  size_t n = want.size() / es, bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* w = want.data() + i * es;
    const uint8_t* g = got.data() + i * es;
    if (memcmp(w, g, es) == 0) continue;
    if (nanEqual && dataTypeIsFloat(dt) && std::isnan(elementToDouble(w, dt)) && std::isnan(elementToDouble(g, dt)))
      continue;
    if (++bad <= 5) {
      uint64_t wb = 0, gb = 0;
      memcpy(&wb, w, es);
      memcpy(&gb, g, es);
      ADD_FAILURE() << what << ": element " << i << " of " << n << ": host 0x" << std::hex << wb << " ("
                    << elementToDouble(w, dt) << "), device 0x" << gb << " (" << elementToDouble(g, dt) << ")";
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

const size_t kCounts[] = {1, 1000, (size_t{1} << 20) + 3};

// One reduce on the device vs reduceArrays on the host. `offset` elements
// shift every pointer (misaligned: the scalar path); inPlace writes into a.
void checkReduce(DataType dt, int op, size_t n, size_t offset, bool inPlace) {
  const Gpu& g = gpu();
  size_t es = dataTypeSize(dt);
  size_t bytes = n * es, off = offset * es;
  auto a = randomElems(dt, n, 1000 * dt + 10 * op + n);
  auto b = randomElems(dt, n, 7777 * dt + 10 * op + n + 1);
  std::vector<uint8_t> want(bytes), got(bytes);
  reduceArrays(want.data(), a.data(), b.data(), n, dt, static_cast<RedKind>(op));

  DevBuf da(bytes + off), db(bytes + off), dd(bytes + off);
  ASSERT_TRUE(da.p && db.p && dd.p);
  DEV_OK(copy(da.c() + off, a.data(), bytes));
  DEV_OK(copy(db.c() + off, b.data(), bytes));
  char* dst = inPlace ? da.c() + off : dd.c() + off;
  int rc = g.api->reduce(dst, da.c() + off, db.c() + off, n, dt, op, nullptr);
  ASSERT_EQ(rc, 0) << g.api->lastError();
  DEV_OK(syncDevice());
  DEV_OK(copy(got.data(), dst, bytes));
  std::string what = std::string("reduce ") + dataTypeName(dt) + " " + kOpNames[op] + " n=" + std::to_string(n) +
                     " offset=" + std::to_string(offset) + (inPlace ? " in place" : "");
  // max/min only move values: NaNs must come through bit for bit too.
  expectSame(want, got, dt, /*nanEqual=*/op < 2, what);
}

class ReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceTest, MatchesHostBitForBit) {
  NEED_GPU();
  DataType dt = static_cast<DataType>(GetParam());
  for (int op = 0; op < 4; ++op)
    for (size_t n : kCounts) {
      checkReduce(dt, op, n, 0, false);
      checkReduce(dt, op, n, 1, false);
      checkReduce(dt, op, n, 0, true);
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReduceTest, ::testing::Range(0, static_cast<int>(hetcclNumTypes)),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(dataTypeName(static_cast<DataType>(i.param)));
                         });

TEST(Kernels, ScaleFloatsMatchesHost) {
  NEED_GPU();
  const Gpu& g = gpu();
  for (int t = 0; t < hetcclNumTypes; ++t) {
    DataType dt = static_cast<DataType>(t);
    if (!dataTypeIsFloat(dt)) continue;
    for (double s : {0.25, 1.0 / 3.0, 1e-3, 7.5})
      for (size_t n : kCounts)
        for (size_t offset : {size_t{0}, size_t{1}}) {
          size_t es = dataTypeSize(dt), bytes = n * es, off = offset * es;
          auto in = randomElems(dt, n, 99 * t + n);
          std::vector<uint8_t> want(bytes), got(bytes);
          scaleArray(want.data(), in.data(), n, dt, s);
          DevBuf di(bytes + off), dd(bytes + off);
          ASSERT_TRUE(di.p && dd.p);
          DEV_OK(copy(di.c() + off, in.data(), bytes));
          int rc = g.api->scale(dd.c() + off, di.c() + off, n, dt, s, nullptr);
          ASSERT_EQ(rc, 0) << g.api->lastError();
          DEV_OK(syncDevice());
          DEV_OK(copy(got.data(), dd.c() + off, bytes));
          expectSame(want, got, dt, true,
                     std::string("scale ") + dataTypeName(dt) + " by " + std::to_string(s) + " n=" + std::to_string(n) +
                         " offset=" + std::to_string(offset));
        }
  }
}

TEST(Kernels, DivideIntegersMatchesHost) {
  NEED_GPU();
  const Gpu& g = gpu();
  for (int t = 0; t < hetcclNumTypes; ++t) {
    DataType dt = static_cast<DataType>(t);
    if (dataTypeIsFloat(dt)) continue;
    for (int d : {1, 3, 7, 8})
      for (size_t n : kCounts)
        for (size_t offset : {size_t{0}, size_t{1}}) {
          size_t es = dataTypeSize(dt), bytes = n * es, off = offset * es;
          auto want = randomElems(dt, n, 31 * t + d + n);
          DevBuf db(bytes + off);
          ASSERT_TRUE(db.p);
          DEV_OK(copy(db.c() + off, want.data(), bytes));
          divideArray(want.data(), n, dt, d);
          int rc = g.api->divide(db.c() + off, n, dt, d, nullptr);
          ASSERT_EQ(rc, 0) << g.api->lastError();
          DEV_OK(syncDevice());
          std::vector<uint8_t> got(bytes);
          DEV_OK(copy(got.data(), db.c() + off, bytes));
          expectSame(want, got, dt, false,
                     std::string("divide ") + dataTypeName(dt) + " by " + std::to_string(d) +
                         " n=" + std::to_string(n) + " offset=" + std::to_string(offset));
        }
  }
}

// Not a check: prints the bandwidth of reduce (two reads, one write) for a
// few types, 256 MiB per operand (on GPUs only: on emu it would only time
// this machine's memory).
TEST(Kernels, ReduceThroughput) {
  NEED_GPU();
  if (gpu().kind == "emu") GTEST_SKIP() << "a bandwidth print for GPUs";
  const Gpu& g = gpu();
  size_t bytes = size_t{256} << 20;
  DevBuf a(bytes), b(bytes), d(bytes);
  ASSERT_TRUE(a.p && b.p && d.p);
  for (DataType dt : {hetcclFloat32, hetcclFloat16, hetcclBfloat16, hetcclFloat8e4m3, hetcclInt64}) {
    size_t n = bytes / dataTypeSize(dt);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(g.api->reduce(d.p, a.p, b.p, n, dt, 0, nullptr), 0);
    DEV_OK(syncDevice());
    const int iters = 20;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) ASSERT_EQ(g.api->reduce(d.p, a.p, b.p, n, dt, 0, nullptr), 0);
    DEV_OK(syncDevice());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    printf("reduce sum %-9s %zu MiB x3: %.1f us, %.0f GB/s\n", dataTypeName(dt), bytes >> 20, s * 1e6,
           3.0 * bytes / s / 1e9);
  }
}

// borderRound (the device border's latency round): 2 and 3 peers in this
// one process, each peer's kernel on a stream of its own, over pinned host
// memory as the border's shared segments are; two rounds (the second waits
// for the first's acks); every peer's result against the host's left-to-
// right fold, bit for bit, for every type and op, peer 0 in place.
void checkRound(DeviceRuntime& rt, DataType dt, int op, int peers, size_t n) {
  const Gpu& g = gpu();
  const size_t es = dataTypeSize(dt), bytes = n * es, area = (bytes + 255) / 256 * 256;
  constexpr size_t kFlag = 64;  // ready, then one ack per reader, each on its own line
  const size_t perPeer = area + kFlag * (1 + peers);
  auto* host = static_cast<uint8_t*>(rt.allocPinned(perPeer * peers));
  ASSERT_NE(host, nullptr);
  memset(host, 0, perPeer * peers);
  auto* dev = static_cast<uint8_t*>(rt.devicePointer(host));
  auto flag = [&](int owner, int which) {
    return reinterpret_cast<unsigned long long*>(dev + owner * perPeer + area + which * kFlag);
  };
  std::vector<std::vector<uint8_t>> in;
  std::vector<std::unique_ptr<DevBuf>> src, dst;
  std::vector<Stream> streams;
  for (int p = 0; p < peers; ++p) {
    in.push_back(randomElems(dt, n, 31 * dt + 7 * op + p));
    src.push_back(std::make_unique<DevBuf>(bytes));
    dst.push_back(std::make_unique<DevBuf>(bytes));
    streams.push_back(rt.createStream());
  }
  std::vector<uint8_t> want = in[0];
  for (int p = 1; p < peers; ++p) reduceArrays(want.data(), want.data(), in[p].data(), n, dt, static_cast<RedKind>(op));
  const std::string what = std::string("borderRound ") + dataTypeName(dt) + " " + kOpNames[op] +
                           " peers=" + std::to_string(peers) + " n=" + std::to_string(n);
  for (unsigned long long seq = 1; seq <= 2; ++seq) {
    for (int p = 0; p < peers; ++p) DEV_OK(copy(src[p]->p, in[p].data(), bytes));
    for (int p = 0; p < peers; ++p) {
      hetcclBorderRound_t r{};
      r.peers = peers;
      r.me = p;
      r.seq = seq;
      r.slotFree = seq - 1;
      for (int q = 0; q < peers; ++q) {
        r.out[q] = dev + q * perPeer;
        r.ready[q] = flag(q, 0);
        if (q == p) continue;
        r.ackIn[q] = flag(p, 1 + q);   // reader q's ack of p's slot
        r.ackOut[q] = flag(q, 1 + p);  // p's ack of q's slot
      }
      void* out = p == 0 ? src[p]->p : dst[p]->p;  // peer 0 in place
      ASSERT_EQ(g.api->borderRound(&r, out, src[p]->p, n, dt, op, streams[p]), 0) << g.api->lastError();
    }
    for (int p = 0; p < peers; ++p) DEV_OK(hetcclStreamSynchronize(g.kind.c_str(), streams[p]));
    for (int p = 0; p < peers; ++p) {
      std::vector<uint8_t> got(bytes);
      DEV_OK(copy(got.data(), p == 0 ? src[p]->p : dst[p]->p, bytes));
      expectSame(want, got, dt, /*nanEqual=*/op < 2,
                 what + " peer " + std::to_string(p) + " round " + std::to_string(seq));
      for (int q = 0; q < peers; ++q) {
        if (q == p) continue;
        EXPECT_EQ(*reinterpret_cast<volatile uint64_t*>(host + q * perPeer + area + (1 + p) * kFlag), seq)
            << what << ": peer " << p << " acked";
      }
    }
  }
  for (Stream s : streams) rt.destroyStream(s);
  rt.freePinned(host);
}

TEST(Kernels, BorderRoundMatchesHostFold) {
  NEED_GPU();
  auto rt = createDeviceRuntime(gpu().kind);
  for (int t = 0; t < static_cast<int>(hetcclNumTypes); ++t)
    for (int op = 0; op < 4; ++op)
      for (int peers : {2, 3}) checkRound(*rt, static_cast<DataType>(t), op, peers, op == 0 ? 4099 : 257);
}

TEST(Kernels, ApiAndBadArguments) {
  NEED_GPU();
  const Gpu& g = gpu();
  EXPECT_EQ(g.api->version, HETCCL_KERNELS_API_VERSION);
  EXPECT_EQ(std::string(g.api->kind), g.kind);
  DevBuf d(64);
  ASSERT_TRUE(d.p);
  EXPECT_EQ(g.api->reduce(d.p, d.p, d.p, 0, hetcclFloat32, 0, nullptr), 0);  // nothing to do
  EXPECT_EQ(g.api->reduce(d.p, d.p, d.p, 4, 12, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(g.api->lastError()).find("data type"), std::string::npos) << g.api->lastError();
  EXPECT_EQ(g.api->reduce(d.p, d.p, d.p, 4, hetcclFloat32, 4, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(g.api->lastError()).find("op"), std::string::npos) << g.api->lastError();
  EXPECT_EQ(g.api->reduce(d.p, nullptr, d.p, 4, hetcclFloat32, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_EQ(g.api->scale(d.p, d.p, 4, hetcclInt32, 0.5, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_EQ(g.api->divide(d.p, 4, hetcclFloat32, 2, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_EQ(g.api->divide(d.p, 4, hetcclInt32, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  hetcclBorderRound_t r{};
  r.peers = 9;  // above HETCCL_BORDER_ROUND_MAX_PEERS
  EXPECT_EQ(g.api->borderRound(&r, d.p, d.p, 4, hetcclFloat32, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(g.api->lastError()).find("peers"), std::string::npos) << g.api->lastError();
  r.peers = 2;  // null slot pointers
  EXPECT_EQ(g.api->borderRound(&r, d.p, d.p, 4, hetcclFloat32, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  EXPECT_EQ(g.api->borderRound(nullptr, d.p, d.p, 4, hetcclFloat32, 0, nullptr), HETCCL_KERNELS_INVALID_ARGUMENT);
  DEV_OK(syncDevice());
  // Cached: the same table again.
  EXPECT_EQ(loadKernels(g.kind), g.api);
}

// In a fresh process (the kernels not yet loaded): once the plugin's
// preload ran, a first kernel launch returns while another stream waits on a
// host flag that this thread stores only afterwards. The runtime's lazy load
// at a first launch can wait for every stream of the device, which here
// waits on this thread: a launch that blocked would never return (SIGALRM
// ends the child then). HETCCL_TEST_NO_PRELOAD=1 leaves the preload out, to
// see the test catch a missing one where the runtime loads lazily (CUDA 12.2
// and later by default; the emulated GPU with HETCCL_EMU_LAZY_LOADING=1).
void firstLaunchBehindAWaitingStream() {
  alarm(20);
  auto rt = createDeviceRuntime(gpu().kind);
  const hetcclKernelsApi_t* api = loadKernels(gpu().kind);
  if (!api) _exit(3);
  const char* skip = getenv("HETCCL_TEST_NO_PRELOAD");
  if (!(skip && std::string(skip) == "1")) preloadKernels(*api);
  auto* flag = static_cast<volatile uint64_t*>(rt->allocPinned(sizeof(uint64_t)));
  *flag = 0;
  void* d = rt->alloc(1024);
  Stream waiting = rt->createStream(), other = rt->createStream();
  rt->streamWaitValue(waiting, flag, 1);
  rt->copy(static_cast<char*>(d) + 512, d, 512, waiting);  // work behind the wait
  // First launches of several kernels: the vector and the scalar path of a
  // reduce, a scale and a divide.
  char* c = static_cast<char*>(d);
  if (api->reduce(d, d, d, 64, hetcclFloat32, 0, other) != HETCCL_KERNELS_SUCCESS ||
      api->reduce(c + 4, c + 4, c + 4, 63, hetcclFloat32, 2, other) != HETCCL_KERNELS_SUCCESS ||
      api->scale(d, d, 64, hetcclBfloat16, 0.5, other) != HETCCL_KERNELS_SUCCESS ||
      api->divide(d, 64, hetcclInt64, 3, other) != HETCCL_KERNELS_SUCCESS)
    _exit(4);
  *flag = 1;
  if (hetcclStreamSynchronize(gpu().kind.c_str(), waiting) != hetcclSuccess ||
      hetcclStreamSynchronize(gpu().kind.c_str(), other) != hetcclSuccess)
    _exit(5);
  _exit(0);
}

TEST(Kernels, PreloadedKernelsLaunchWhileAStreamWaitsOnThisThread) {
  NEED_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child runs the binary afresh: nothing loaded yet
  // The emulated GPU loads lazily only when asked to (the child inherits it).
  const bool emu = gpu().kind == "emu";
  if (emu) setenv("HETCCL_EMU_LAZY_LOADING", "1", 1);
  EXPECT_EXIT(firstLaunchBehindAWaitingStream(), ::testing::ExitedWithCode(0), "");
  if (emu) unsetenv("HETCCL_EMU_LAZY_LOADING");
  EXPECT_EQ(gpu().api->preload(), HETCCL_KERNELS_SUCCESS) << gpu().api->lastError();  // again: nothing to do
}

// The pair relay makes a channel at a pair's first use (border/pair_relay.h):
// it maps memory and registers it with the runtime while a stream of an
// earlier call may still wait on a flag that only a relay or a peer
// stores. Here the stream waits on a flag that this thread stores only
// after registering 8 MiB: a registration that waited for the device would
// never return (SIGALRM ends the child then).
void registerBehindAWaitingStream() {
  alarm(20);
  auto rt = createDeviceRuntime(gpu().kind);
  auto* flag = static_cast<volatile uint64_t*>(rt->allocPinned(sizeof(uint64_t)));
  *flag = 0;
  void* d = rt->alloc(1024);
  Stream waiting = rt->createStream();
  rt->streamWaitValue(waiting, flag, 1);
  rt->copy(static_cast<char*>(d) + 512, d, 512, waiting);  // work behind the wait
  constexpr size_t kBytes = size_t{8} << 20;
  void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (m == MAP_FAILED) _exit(3);
  rt->registerHost(m, kBytes);
  if (!rt->devicePointer(m)) _exit(4);
  *flag = 1;
  if (hetcclStreamSynchronize(gpu().kind.c_str(), waiting) != hetcclSuccess) _exit(5);
  rt->unregisterHost(m);  // at the end, with nothing in flight (as the relay's end does)
  munmap(m, kBytes);
  _exit(0);
}

TEST(Runtime, RegisterHostWhileAStreamWaitsOnThisThread) {
  NEED_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(registerBehindAWaitingStream(), ::testing::ExitedWithCode(0), "");
}

// A stream made after another was destroyed may get its handle back (the
// runtime reuses them); issue order tells the two apart by their ids, so
// each must have its own, and the GPU runtimes must have them.
TEST(Runtime, AStreamMadeAfterAnotherWasDestroyedHasANewId) {
  NEED_GPU();
  auto rt = createDeviceRuntime(gpu().kind);
  std::set<uint64_t> ids;
  std::set<Stream> handles;
  int handlesBack = 0;
  for (int i = 0; i < 64; ++i) {
    Stream s = rt->createStream();
    const uint64_t id = rt->streamId(s);
    if (id == 0 && gpu().kind != "emu") {  // CUDA before 12, ROCm before hipStreamGetId: every call waits
      rt->destroyStream(s);
      GTEST_SKIP() << "this " << gpu().kind << " runtime has no stream ids (cudaStreamGetId, hipStreamGetId)";
    }
    EXPECT_NE(id, 0u) << gpu().kind << " has no stream ids (cudaStreamGetId, hipStreamGetId)";
    EXPECT_TRUE(ids.insert(id).second) << "id " << id << " given twice";
    handlesBack += !handles.insert(s).second;
    rt->destroyStream(s);
  }
  RecordProperty("handles_back", handlesBack);
}

}  // namespace
}  // namespace hetccl
