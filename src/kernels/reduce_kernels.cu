// hetccl's device reduction kernels: one source, built by nvcc as CUDA into
// libhetccl-cuda-kernels.so and by hipcc as HIP into libhetccl-hip-kernels.so
// (gpu_compat.h names the differences). The C ABI is kernels_api.h.
//
// The arithmetic matches the host reference (src/elements/host_reduce.cc,
// src/elements/lowp.cc) bit for bit: integers wrap (sum and product done
// unsigned); max/min let a NaN operand win, either side; float16, bfloat16
// and fp8 load to float, combine in float and round once to nearest-even;
// fp8 (OCP e4m3 "fn" and e5m2) saturates beyond the largest finite, infinity
// included, and NaN stays NaN. NaNs produced by arithmetic (inf - inf, ...)
// are a NaN on both sides, though sign and payload may differ (the x86 and
// GPU default NaNs differ).
//
// The element codecs are src/elements/codecs.h, which the host's
// conversions (lowp.h) are too.

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#if defined(HETCCL_EMU_BUILD)
#include <sched.h>
#endif

#include "gpu_compat.h"
#include "kernels_api.h"
// After gpu_compat.h, which sets HETCCL_DEV for kernels.
#include "elements/codecs.h"

namespace hetccl_gpu {

using namespace hetccl::codec;

#if defined(HETCCL_GPU_BUILD)

// ---- kernels ----------------------------------------------------------------

constexpr int kThreads = 256;

template <class S, int N>
union Pack {
  Raw16 raw;
  S v[N];
};

template <class S, int K>
struct ReduceFn {
  HETCCL_DEV S operator()(S a, S b) const {
    using E = Elem<S>;
    return E::store(combine<typename E::V, K>(E::load(a), E::load(b)));
  }
};

template <class S, class V>
struct ScaleFn {
  V s;
  HETCCL_DEV S operator()(S x) const { return Elem<S>::store(Elem<S>::load(x) * s); }
};

template <class T>
struct DivideFn {
  T d;
  HETCCL_DEV T operator()(T x) const { return static_cast<T>(x / d); }
};

// dst[i] = f(a[i], b[i]); VEC: 16-byte loads and stores (all three pointers
// 16-byte aligned), then the tail element by element. Grid-stride.
template <class S, bool VEC, class F>
__global__ void __launch_bounds__(kThreads) binaryKernel(S* dst, const S* a, const S* b, size_t n, F f) {
  size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (VEC) {
    constexpr int N = 16 / sizeof(S);
    size_t nv = n / N;
    const Raw16* va = reinterpret_cast<const Raw16*>(a);
    const Raw16* vb = reinterpret_cast<const Raw16*>(b);
    Raw16* vd = reinterpret_cast<Raw16*>(dst);
    for (size_t i = tid; i < nv; i += stride) {
      Pack<S, N> x, y, z;
      x.raw = va[i];
      y.raw = vb[i];
#pragma unroll
      for (int j = 0; j < N; ++j) z.v[j] = f(x.v[j], y.v[j]);
      vd[i] = z.raw;
    }
    done = nv * N;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = f(a[i], b[i]);
}

template <class S, bool VEC, class F>
__global__ void __launch_bounds__(kThreads) unaryKernel(S* dst, const S* src, size_t n, F f) {
  size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (VEC) {
    constexpr int N = 16 / sizeof(S);
    size_t nv = n / N;
    const Raw16* vs = reinterpret_cast<const Raw16*>(src);
    Raw16* vd = reinterpret_cast<Raw16*>(dst);
    for (size_t i = tid; i < nv; i += stride) {
      Pack<S, N> x, z;
      x.raw = vs[i];
#pragma unroll
      for (int j = 0; j < N; ++j) z.v[j] = f(x.v[j]);
      vd[i] = z.raw;
    }
    done = nv * N;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = f(src[i]);
}

// ---- the device border's latency round (kernels_api.h, borderRound) --------

// Flags in mapped host memory that other processes' GPUs (or CPUs) store:
// loads with acquire and stores with release semantics at system scope.
HETCCL_DEV unsigned long long loadAcquire(const unsigned long long* p) {
#if defined(__CUDA_ARCH__)
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#elif defined(__HIP__)
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#elif defined(__CUDACC__)
  return *p;      // nvcc's host pass of a device-only function: never runs
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
HETCCL_DEV void storeRelease(unsigned long long* p, unsigned long long v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
#elif defined(__HIP__)
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#elif defined(__CUDACC__)
  *p = v;         // nvcc's host pass: never runs
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}
HETCCL_DEV void spinPause() {
#if defined(__CUDA_ARCH__)
  __nanosleep(20);
#elif defined(__HIP_DEVICE_COMPILE__)
  __builtin_amdgcn_s_sleep(1);
#elif defined(HETCCL_EMU_BUILD)
  sched_yield();  // the emulated GPU is a CPU thread: let the peers' processes run
#endif
}
// Until *f >= v under both stream-wait comparisons (kernels_api.h).
HETCCL_DEV void waitFlag(const unsigned long long* f, unsigned long long v) {
  for (;;) {
    unsigned long long x = loadAcquire(f);
    if (x >= v && static_cast<long long>(x - v) >= 0) return;
    spinPause();
  }
}

template <size_t B>
struct RawOf;
template <>
struct RawOf<1> {
  using type = uint8_t;
};
template <>
struct RawOf<2> {
  using type = uint16_t;
};
template <>
struct RawOf<4> {
  using type = uint32_t;
};
template <>
struct RawOf<8> {
  using type = unsigned long long;
};

// A peer's element, read from memory again (never from a cache line kept
// from the slot's earlier use).
template <class S>
HETCCL_DEV S loadFresh(const S* p) {
  using U = typename RawOf<sizeof(S)>::type;
  U u = *reinterpret_cast<const volatile U*>(p);
  S s;
  memcpy(&s, &u, sizeof(S));
  return s;
}

// One block: thread 0 waits and stores the flags, every thread copies and
// folds a strided share of the elements. Fences: each thread's stores reach
// the system before the barrier after which thread 0 announces them; the
// peers' data is read after thread 0's acquire and a barrier and fence.
template <class S, int K>
__global__ void __launch_bounds__(kThreads) borderRoundKernel(hetcclBorderRound_t r, S* dst, const S* src, size_t n) {
  const size_t t = threadIdx.x, nt = blockDim.x;
  if (t == 0 && r.slotFree)
    for (int q = 0; q < r.peers; ++q)
      if (q != r.me) waitFlag(r.ackIn[q], r.slotFree);
  __syncthreads();
  S* mine = static_cast<S*>(r.out[r.me]);
  for (size_t i = t; i < n; i += nt) mine[i] = src[i];
  __threadfence_system();
  __syncthreads();
  if (t == 0) {
    storeRelease(r.ready[r.me], r.seq);
    for (int q = 0; q < r.peers; ++q)
      if (q != r.me) waitFlag(r.ready[q], r.seq);
  }
  __syncthreads();
  __threadfence_system();
  ReduceFn<S, K> f;
  auto v = [&](int g, size_t i) { return g == r.me ? src[i] : loadFresh(static_cast<const S*>(r.out[g]) + i); };
  for (size_t i = t; i < n; i += nt) {
    S acc = v(0, i);
    for (int g = 1; g < r.peers; ++g) acc = f(acc, v(g, i));
    dst[i] = acc;
  }
  __threadfence_system();
  __syncthreads();
  if (t == 0)
    for (int q = 0; q < r.peers; ++q)
      if (q != r.me) storeRelease(r.ackOut[q], r.seq);
}

// ---- launchers --------------------------------------------------------------

thread_local char tErr[512];
// Set by preload(): the launchers load their kernels instead of launching.
thread_local bool tPreload = false;

int fail(int code, const char* what, const char* detail) {
  snprintf(tErr, sizeof(tErr), "hetccl %s kernels: %s%s%s", HETCCL_GPU_KIND, what, detail ? ": " : "",
           detail ? detail : "");
  return code;
}

template <class K>
int loadKernel(K kernel) {
  gpuError_t e = gpuLoadKernel(kernel);
  if (e == gpuSuccess) return HETCCL_KERNELS_SUCCESS;
  (void)gpuGetLastError();  // reported here, not by the thread's next error check
  return fail(HETCCL_KERNELS_DEVICE_ERROR, "loading a kernel failed", gpuGetErrorString(e));
}

int checkLaunch(const char* what) {
  gpuError_t e = gpuGetLastError();
  if (e == gpuSuccess) return HETCCL_KERNELS_SUCCESS;
  char msg[128];
  snprintf(msg, sizeof(msg), "%s launch failed (error %d)", what, static_cast<int>(e));
  return fail(HETCCL_KERNELS_DEVICE_ERROR, msg, gpuGetErrorString(e));
}

// Blocks of one launch: enough to fill the device (8 x 256 threads per
// multiprocessor), fewer when the work is small. The multiprocessor count is
// cached per device.
int gridFor(size_t units, unsigned* blocks) {
  constexpr int kMaxDevices = 128;
  static int smCount[kMaxDevices];  // 0: unknown; races write the same value
  int dev = 0;
  gpuError_t e = gpuGetDevice(&dev);
  if (e != gpuSuccess) return fail(HETCCL_KERNELS_DEVICE_ERROR, "cannot get the current device", gpuGetErrorString(e));
  int sms = (dev >= 0 && dev < kMaxDevices) ? __atomic_load_n(&smCount[dev], __ATOMIC_RELAXED) : 0;
  if (sms <= 0) {
    e = gpuDeviceGetAttribute(&sms, gpuDevAttrMultiProcessorCount, dev);
    if (e != gpuSuccess || sms <= 0) sms = 132;
    if (dev >= 0 && dev < kMaxDevices) __atomic_store_n(&smCount[dev], sms, __ATOMIC_RELAXED);
  }
  size_t want = (units + kThreads - 1) / kThreads;
  size_t most = static_cast<size_t>(sms) * 8;
  *blocks = static_cast<unsigned>(want < 1 ? 1 : (want > most ? most : want));
  return HETCCL_KERNELS_SUCCESS;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Threads worth of work: vector units, or the elements when the tail is bigger.
template <class S>
size_t unitsOf(size_t n, bool vec) {
  if (!vec) return n;
  size_t N = 16 / sizeof(S);
  size_t nv = n / N, tail = n % N;
  return nv > tail ? nv : tail;
}

template <class S, class F>
int launchBinary(void* dst, const void* a, const void* b, size_t n, F f, gpuStream_t stream, const char* what) {
  if (tPreload) {
    int rc = loadKernel(&binaryKernel<S, true, F>);
    return rc ? rc : loadKernel(&binaryKernel<S, false, F>);
  }
  bool vec = aligned16(dst) && aligned16(a) && aligned16(b);
  unsigned blocks = 0;
  int rc = gridFor(unitsOf<S>(n, vec), &blocks);
  if (rc) return rc;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  void (*kernel)(S*, const S*, const S*, size_t, F) = vec ? &binaryKernel<S, true, F> : &binaryKernel<S, false, F>;
  HETCCL_LAUNCH(kernel, blocks, kThreads, stream, d, x, y, n, f);
  return checkLaunch(what);
}

template <class S, class F>
int launchUnary(void* dst, const void* src, size_t n, F f, gpuStream_t stream, const char* what) {
  if (tPreload) {
    int rc = loadKernel(&unaryKernel<S, true, F>);
    return rc ? rc : loadKernel(&unaryKernel<S, false, F>);
  }
  bool vec = aligned16(dst) && aligned16(src);
  unsigned blocks = 0;
  int rc = gridFor(unitsOf<S>(n, vec), &blocks);
  if (rc) return rc;
  S* d = static_cast<S*>(dst);
  const S* s = static_cast<const S*>(src);
  void (*kernel)(S*, const S*, size_t, F) = vec ? &unaryKernel<S, true, F> : &unaryKernel<S, false, F>;
  HETCCL_LAUNCH(kernel, blocks, kThreads, stream, d, s, n, f);
  return checkLaunch(what);
}

template <class S>
int reduceTyped(void* dst, const void* a, const void* b, size_t n, int op, gpuStream_t s) {
  switch (op) {
    case kSum: return launchBinary<S>(dst, a, b, n, ReduceFn<S, kSum>{}, s, "reduce(sum)");
    case kProd: return launchBinary<S>(dst, a, b, n, ReduceFn<S, kProd>{}, s, "reduce(prod)");
    case kMax: return launchBinary<S>(dst, a, b, n, ReduceFn<S, kMax>{}, s, "reduce(max)");
    case kMin: return launchBinary<S>(dst, a, b, n, ReduceFn<S, kMin>{}, s, "reduce(min)");
  }
  char msg[64];
  snprintf(msg, sizeof(msg), "%d", op);
  return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "reduce: unknown op", msg);
}

const size_t kElemSize[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

int checkArgs(const char* what, int dtype, size_t count, const void* p, const void* q, const void* r) {
  char msg[64];
  if (dtype < 0 || dtype >= 12) {
    snprintf(msg, sizeof(msg), "%d", dtype);
    return fail(HETCCL_KERNELS_INVALID_ARGUMENT, what, msg);
  }
  if (count > SIZE_MAX / kElemSize[dtype]) return fail(HETCCL_KERNELS_INVALID_ARGUMENT, what, "count too large");
  if (count && (!p || !q || !r)) return fail(HETCCL_KERNELS_INVALID_ARGUMENT, what, "null buffer");
  return HETCCL_KERNELS_SUCCESS;
}

int reduceImpl(void* dst, const void* a, const void* b, size_t count, int dtype, int op, void* stream) {
  int rc = checkArgs("reduce: bad data type", dtype, count, dst, a, b);
  if (rc) return rc;
  if (count == 0) return HETCCL_KERNELS_SUCCESS;
  gpuStream_t s = static_cast<gpuStream_t>(stream);
  switch (dtype) {
    case 0: return reduceTyped<int8_t>(dst, a, b, count, op, s);
    case 1: return reduceTyped<uint8_t>(dst, a, b, count, op, s);
    case 2: return reduceTyped<int32_t>(dst, a, b, count, op, s);
    case 3: return reduceTyped<uint32_t>(dst, a, b, count, op, s);
    case 4: return reduceTyped<int64_t>(dst, a, b, count, op, s);
    case 5: return reduceTyped<uint64_t>(dst, a, b, count, op, s);
    case 6: return reduceTyped<Half>(dst, a, b, count, op, s);
    case 7: return reduceTyped<float>(dst, a, b, count, op, s);
    case 8: return reduceTyped<double>(dst, a, b, count, op, s);
    case 9: return reduceTyped<Bf16>(dst, a, b, count, op, s);
    case 10: return reduceTyped<E4m3>(dst, a, b, count, op, s);
    default: return reduceTyped<E5m2>(dst, a, b, count, op, s);
  }
}

// Floats: float32 and narrower multiply by (float)scalar, float64 by scalar
// (host scaleArray).
int scaleImpl(void* dst, const void* src, size_t count, int dtype, double scalar, void* stream) {
  int rc = checkArgs("scale: bad data type", dtype, count, dst, src, src);
  if (rc) return rc;
  if (dtype <= 5)
    return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "scale: integer types are not scaled on the device", nullptr);
  if (count == 0) return HETCCL_KERNELS_SUCCESS;
  gpuStream_t s = static_cast<gpuStream_t>(stream);
  float f = static_cast<float>(scalar);
  switch (dtype) {
    case 6: return launchUnary<Half>(dst, src, count, ScaleFn<Half, float>{f}, s, "scale");
    case 7: return launchUnary<float>(dst, src, count, ScaleFn<float, float>{f}, s, "scale");
    case 8: return launchUnary<double>(dst, src, count, ScaleFn<double, double>{scalar}, s, "scale");
    case 9: return launchUnary<Bf16>(dst, src, count, ScaleFn<Bf16, float>{f}, s, "scale");
    case 10: return launchUnary<E4m3>(dst, src, count, ScaleFn<E4m3, float>{f}, s, "scale");
    default: return launchUnary<E5m2>(dst, src, count, ScaleFn<E5m2, float>{f}, s, "scale");
  }
}

// Integers: buf[i] = buf[i] / (T)divisor, truncating (host divideArray).
int divideImpl(void* buf, size_t count, int dtype, int divisor, void* stream) {
  int rc = checkArgs("divide: bad data type", dtype, count, buf, buf, buf);
  if (rc) return rc;
  if (dtype > 5)
    return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "divide: floating types average by scale, not division", nullptr);
  if (divisor == 0) return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "divide: divisor is 0", nullptr);
  if (count == 0) return HETCCL_KERNELS_SUCCESS;
  gpuStream_t s = static_cast<gpuStream_t>(stream);
  switch (dtype) {
    case 0: return launchUnary<int8_t>(buf, buf, count, DivideFn<int8_t>{static_cast<int8_t>(divisor)}, s, "divide");
    case 1: return launchUnary<uint8_t>(buf, buf, count, DivideFn<uint8_t>{static_cast<uint8_t>(divisor)}, s, "divide");
    case 2: return launchUnary<int32_t>(buf, buf, count, DivideFn<int32_t>{static_cast<int32_t>(divisor)}, s, "divide");
    case 3:
      return launchUnary<uint32_t>(buf, buf, count, DivideFn<uint32_t>{static_cast<uint32_t>(divisor)}, s, "divide");
    case 4: return launchUnary<int64_t>(buf, buf, count, DivideFn<int64_t>{static_cast<int64_t>(divisor)}, s, "divide");
    default:
      return launchUnary<uint64_t>(buf, buf, count, DivideFn<uint64_t>{static_cast<uint64_t>(divisor)}, s, "divide");
  }
}

template <class S>
int roundTyped(const hetcclBorderRound_t& r, void* dst, const void* src, size_t n, int op, gpuStream_t s) {
  void (*k)(hetcclBorderRound_t, S*, const S*, size_t) = nullptr;
  switch (op) {
    case kSum: k = &borderRoundKernel<S, kSum>; break;
    case kProd: k = &borderRoundKernel<S, kProd>; break;
    case kMax: k = &borderRoundKernel<S, kMax>; break;
    case kMin: k = &borderRoundKernel<S, kMin>; break;
    default: {
      char msg[64];
      snprintf(msg, sizeof(msg), "%d", op);
      return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "borderRound: unknown op", msg);
    }
  }
  if (tPreload) return loadKernel(k);
  HETCCL_LAUNCH(k, 1, kThreads, s, r, static_cast<S*>(dst), static_cast<const S*>(src), n);
  return checkLaunch("borderRound");
}

int borderRoundImpl(const hetcclBorderRound_t* r, void* dst, const void* src, size_t count, int dtype, int op,
                    void* stream) {
  int rc = checkArgs("borderRound: bad data type", dtype, count, dst, src, r);
  if (rc) return rc;
  if (!r || r->peers < 2 || r->peers > HETCCL_BORDER_ROUND_MAX_PEERS || r->me < 0 || r->me >= r->peers)
    return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "borderRound: peers must be 2 to 8 and me one of them", nullptr);
  for (int q = 0; q < r->peers; ++q)
    if (!r->out[q] || !r->ready[q] || (q != r->me && (!r->ackIn[q] || !r->ackOut[q])))
      return fail(HETCCL_KERNELS_INVALID_ARGUMENT, "borderRound: a null slot or flag pointer", nullptr);
  gpuStream_t s = static_cast<gpuStream_t>(stream);
  switch (dtype) {
    case 0: return roundTyped<int8_t>(*r, dst, src, count, op, s);
    case 1: return roundTyped<uint8_t>(*r, dst, src, count, op, s);
    case 2: return roundTyped<int32_t>(*r, dst, src, count, op, s);
    case 3: return roundTyped<uint32_t>(*r, dst, src, count, op, s);
    case 4: return roundTyped<int64_t>(*r, dst, src, count, op, s);
    case 5: return roundTyped<uint64_t>(*r, dst, src, count, op, s);
    case 6: return roundTyped<Half>(*r, dst, src, count, op, s);
    case 7: return roundTyped<float>(*r, dst, src, count, op, s);
    case 8: return roundTyped<double>(*r, dst, src, count, op, s);
    case 9: return roundTyped<Bf16>(*r, dst, src, count, op, s);
    case 10: return roundTyped<E4m3>(*r, dst, src, count, op, s);
    default: return roundTyped<E5m2>(*r, dst, src, count, op, s);
  }
}

const char* lastErrorImpl() { return tErr; }

// Every entry once per type and op with placeholder arguments (never read:
// the launchers only load their kernels while tPreload is set).
int preloadImpl() {
  alignas(16) static unsigned long long placeholder[2];
  void* p = placeholder;
  hetcclBorderRound_t r = {};
  r.peers = 2;
  for (int q = 0; q < 2; ++q) {
    r.out[q] = p;
    r.ready[q] = r.ackIn[q] = r.ackOut[q] = placeholder;
  }
  tPreload = true;
  int rc = HETCCL_KERNELS_SUCCESS;
  for (int dt = 0; dt < 12 && !rc; ++dt) {
    for (int op = kSum; op <= kMin && !rc; ++op) {
      rc = reduceImpl(p, p, p, 1, dt, op, nullptr);
      if (!rc) rc = borderRoundImpl(&r, p, p, 1, dt, op, nullptr);
    }
    if (!rc) rc = dt <= 5 ? divideImpl(p, 1, dt, 1, nullptr) : scaleImpl(p, p, 1, dt, 1.0, nullptr);
  }
  tPreload = false;
  return rc;
}

const hetcclKernelsApi_t kApi = {HETCCL_KERNELS_API_VERSION,
                                 HETCCL_GPU_KIND,
                                 reduceImpl,
                                 scaleImpl,
                                 divideImpl,
                                 lastErrorImpl,
                                 borderRoundImpl,
                                 preloadImpl};

#endif  // HETCCL_GPU_BUILD

}  // namespace hetccl_gpu

#if defined(HETCCL_GPU_BUILD)
extern "C" __attribute__((visibility("default"))) const hetcclKernelsApi_t* hetcclKernelsGetApi(int version) {
  return version == HETCCL_KERNELS_API_VERSION ? &hetccl_gpu::kApi : nullptr;
}
#endif
