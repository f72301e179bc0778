#include "elements/host_reduce.h"
#include "core/bytes.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "elements/lowp.h"
#include "core/error.h"

namespace hetccl {
namespace {

// Combine of two values of arithmetic type V.
// Integers wrap (two's complement) as on the GPU, so sum and product are done
// unsigned: signed overflow would be undefined.
template <class V, bool = std::is_integral_v<V>>
struct ArithOf {
  using type = V;
};
template <class V>
struct ArithOf<V, true> {
  using type = std::make_unsigned_t<V>;
};
template <class V>
using Arith = typename ArithOf<V>::type;

template <class V>
inline V combine(V a, V b, RedKind k) {
  using A = Arith<V>;
  switch (k) {
    case RedKind::kSum: return static_cast<V>(static_cast<A>(static_cast<A>(a) + static_cast<A>(b)));
    case RedKind::kProd: return static_cast<V>(static_cast<A>(static_cast<A>(a) * static_cast<A>(b)));
    case RedKind::kMax: return (a != a || a > b) ? a : b;  // NaN wins, either side
    case RedKind::kMin: return (a != a || a < b) ? a : b;
  }
  return a;
}

// Storage type S, computed in V via load/store conversions.
template <class S, class V, V (*Load)(S), S (*Store)(V), RedKind K>
[[gnu::always_inline]] inline void loop(S* __restrict out, const S* a, const S* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = Store(combine<V>(Load(a[i]), Load(b[i]), K));
}

template <class T>
inline T same(T v) {
  return v;
}
inline float ldHalf(uint16_t v) { return halfToFloat(v); }
inline uint16_t stHalf(float v) { return floatToHalf(v); }
inline float ldBf16(uint16_t v) { return bf16ToFloat(v); }
inline uint16_t stBf16(float v) { return floatToBf16(v); }
inline float ldE4m3(uint8_t v) { return fp8e4m3ToFloat(v); }
inline uint8_t stE4m3(float v) { return floatToFp8e4m3(v); }
inline float ldE5m2(uint8_t v) { return fp8e5m2ToFloat(v); }
inline uint8_t stE5m2(float v) { return floatToFp8e5m2(v); }

// ThreadSanitizer's runtime is not up yet when the loader resolves the
// clones' ifuncs: sanitizer builds use the baseline code only.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define HETCCL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HETCCL_CLONES
#endif

// One cloned function per (type, op): the loader picks the widest the CPU has.
#define DEFINE_KIND(NAME, S, V, LD, ST, K)                                                              \
  HETCCL_CLONES void NAME(void* out, const void* a, const void* b, size_t n) {                          \
    loop<S, V, LD, ST, K>(static_cast<S*>(out), static_cast<const S*>(a), static_cast<const S*>(b), n); \
  }
#define DEFINE_TYPE(SUF, S, V, LD, ST)                  \
  DEFINE_KIND(sum_##SUF, S, V, LD, ST, RedKind::kSum)   \
  DEFINE_KIND(prod_##SUF, S, V, LD, ST, RedKind::kProd) \
  DEFINE_KIND(max_##SUF, S, V, LD, ST, RedKind::kMax)   \
  DEFINE_KIND(min_##SUF, S, V, LD, ST, RedKind::kMin)

DEFINE_TYPE(i8, int8_t, int8_t, same<int8_t>, same<int8_t>)
DEFINE_TYPE(u8, uint8_t, uint8_t, same<uint8_t>, same<uint8_t>)
DEFINE_TYPE(i32, int32_t, int32_t, same<int32_t>, same<int32_t>)
DEFINE_TYPE(u32, uint32_t, uint32_t, same<uint32_t>, same<uint32_t>)
DEFINE_TYPE(i64, int64_t, int64_t, same<int64_t>, same<int64_t>)
DEFINE_TYPE(u64, uint64_t, uint64_t, same<uint64_t>, same<uint64_t>)
DEFINE_TYPE(f16, uint16_t, float, ldHalf, stHalf)
DEFINE_TYPE(f32, float, float, same<float>, same<float>)
DEFINE_TYPE(f64, double, double, same<double>, same<double>)
DEFINE_TYPE(bf16, uint16_t, float, ldBf16, stBf16)
DEFINE_TYPE(e4m3, uint8_t, float, ldE4m3, stE4m3)
DEFINE_TYPE(e5m2, uint8_t, float, ldE5m2, stE5m2)

using Kernel = void (*)(void*, const void*, const void*, size_t);
#define ROW(SUF) \
  { sum_##SUF, prod_##SUF, max_##SUF, min_##SUF }
const Kernel kKernels[hetcclNumTypes][4] = {ROW(i8),  ROW(u8),  ROW(i32), ROW(u32),  ROW(i64),  ROW(u64),
                                            ROW(f16), ROW(f32), ROW(f64), ROW(bf16), ROW(e4m3), ROW(e5m2)};

// Integer arithmetic wraps (two's complement), as on the GPU: do it unsigned.
template <class T>
void scaleInt(T* out, const T* in, size_t n, double s) {
  using U = std::make_unsigned_t<T>;
  U m = static_cast<U>(static_cast<T>(std::llround(s)));
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<U>(in[i]) * m);
}
template <class S, float (*LD)(S), S (*ST)(float)>
void scaleLow(S* out, const S* in, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) out[i] = ST(LD(in[i]) * s);
}
template <class T>
void divideInt(T* buf, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(buf[i] / static_cast<T>(d));
}

}  // namespace

void reduceArrays(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind kind) {
  if (n == 0) return;
  kKernels[dt][static_cast<int>(kind)](out, a, b, n);
}

void scaleArray(void* out, const void* in, size_t n, DataType dt, double s) {
  switch (dt) {
    case hetcclInt8: return scaleInt(static_cast<int8_t*>(out), static_cast<const int8_t*>(in), n, s);
    case hetcclUint8: return scaleInt(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(in), n, s);
    case hetcclInt32: return scaleInt(static_cast<int32_t*>(out), static_cast<const int32_t*>(in), n, s);
    case hetcclUint32: return scaleInt(static_cast<uint32_t*>(out), static_cast<const uint32_t*>(in), n, s);
    case hetcclInt64: return scaleInt(static_cast<int64_t*>(out), static_cast<const int64_t*>(in), n, s);
    case hetcclUint64: return scaleInt(static_cast<uint64_t*>(out), static_cast<const uint64_t*>(in), n, s);
    case hetcclFloat32: {
      float f = static_cast<float>(s);
      auto* o = static_cast<float*>(out);
      auto* p = static_cast<const float*>(in);
      for (size_t i = 0; i < n; ++i) o[i] = p[i] * f;
      return;
    }
    case hetcclFloat64: {
      auto* o = static_cast<double*>(out);
      auto* p = static_cast<const double*>(in);
      for (size_t i = 0; i < n; ++i) o[i] = p[i] * s;
      return;
    }
    case hetcclFloat16:
      return scaleLow<uint16_t, ldHalf, stHalf>(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(in), n, s);
    case hetcclBfloat16:
      return scaleLow<uint16_t, ldBf16, stBf16>(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(in), n, s);
    case hetcclFloat8e4m3:
      return scaleLow<uint8_t, ldE4m3, stE4m3>(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(in), n, s);
    case hetcclFloat8e5m2:
      return scaleLow<uint8_t, ldE5m2, stE5m2>(static_cast<uint8_t*>(out), static_cast<const uint8_t*>(in), n, s);
    default: throwError(hetcclInternalError, "scaleArray: bad data type");
  }
}

void divideArray(void* buf, size_t n, DataType dt, int d) {
  switch (dt) {
    case hetcclInt8: return divideInt(static_cast<int8_t*>(buf), n, d);
    case hetcclUint8: return divideInt(static_cast<uint8_t*>(buf), n, d);
    case hetcclInt32: return divideInt(static_cast<int32_t*>(buf), n, d);
    case hetcclUint32: return divideInt(static_cast<uint32_t*>(buf), n, d);
    case hetcclInt64: return divideInt(static_cast<int64_t*>(buf), n, d);
    case hetcclUint64: return divideInt(static_cast<uint64_t*>(buf), n, d);
    default: throwError(hetcclInternalError, "divideArray: floats average by PreMulSum, not division");
  }
}

void foldOrdered(void* dst, const void* const* parts, int nparts, size_t n, DataType dt, RedKind kind, void* scratch) {
  foldLeft(
      dst, parts, nparts, scratch,
      [&](void* out, const void* a, const void* b) { reduceArrays(out, a, b, n, dt, kind); },
      [&](void* to, const void* from) { copyBytes(to, from, n * dataTypeSize(dt)); });
}

}  // namespace hetccl
