// The element codecs and combine rules, one header for host and device:
// float16 and bfloat16 to and from float (lowp.h's, the host's), fp8 to and
// from float branch-free (the device kernels'; lowp.cc keeps a plain
// reference of its own that the kernel tests check these against), the
// element types with their compute types, and the four reductions
// (reduce_kernels.cu has the rules). HETCCL_DEV is `inline` for the host,
// `__device__ __forceinline__` in kernels (src/kernels/gpu_compat.h sets it
// before including this).
#pragma once

#include <stdint.h>
#include <string.h>

#include <type_traits>

#ifndef HETCCL_DEV
#define HETCCL_DEV inline
#endif

namespace hetccl::codec {

// IEEE half <-> float for values that are not NaN (the caller handles NaN):
// exact widening; narrowing rounds to nearest-even, overflows to infinity,
// keeps subnormals. One hardware instruction on either vendor.
HETCCL_DEV float halfBitsToFloatNoNan(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#elif defined(__CUDACC__) && !defined(__HIP__)
  return 0.0f;  // nvcc's host pass of a device-only function: never runs
#else  // HIP device code (clang) or plain C++ (gcc, clang): _Float16
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
#endif
}

HETCCL_DEV uint16_t floatToHalfBitsNoNan(float f) {
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#elif defined(__CUDACC__) && !defined(__HIP__)
  return 0;     // nvcc's host pass of a device-only function: never runs
#else
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
#endif
}

// ---- element codecs ---------------------------------------------------------

HETCCL_DEV uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
HETCCL_DEV float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// NaN keeps its bits through load and store, signalling ones included: the
// host reference (GCC) returns max/min's NaN operand unchanged; NaNs that
// arithmetic makes are quiet on both sides. A float NaN whose payload does
// not reach the half's 10 bits becomes a quiet NaN (as x86 narrows).
HETCCL_DEV float halfToFloat(uint16_t h) {
  if ((h & 0x7fffu) > 0x7c00u)
    return bitsFloat((static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u |
                     (static_cast<uint32_t>(h & 0x3ffu) << 13));
  return halfBitsToFloatNoNan(h);
}
HETCCL_DEV uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    uint32_t mant = (u >> 13) & 0x3ffu;
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7c00u | (mant ? mant : 0x200u));
  }
  return floatToHalfBitsNoNan(f);
}

HETCCL_DEV float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }
HETCCL_DEV uint16_t floatToBf16(float f) {
  uint32_t bits = floatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The two OCP fp8 formats, as lowp.cc's Fp8Format.
struct FmtE4M3 {
  static constexpr int kMant = 3, kBias = 7;
  static constexpr bool kInf = false;
  static constexpr uint32_t kMaxBits = 0x7e;              // 448
  static constexpr uint32_t kMaxFloatBits = 0x43e00000u;  // 448.0f
};
struct FmtE5M2 {
  static constexpr int kMant = 2, kBias = 15;
  static constexpr bool kInf = true;
  static constexpr uint32_t kMaxBits = 0x7b;              // 57344
  static constexpr uint32_t kMaxFloatBits = 0x47600000u;  // 57344.0f
};

// Branch-free (every case computed, then selected): 16 elements a thread.
template <class F>
HETCCL_DEV float fp8ToFloat(uint8_t v) {
  constexpr int M = F::kMant;
  constexpr uint32_t kExpMax = (1u << (7 - M)) - 1;
  uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t exp = (v >> M) & kExpMax;
  uint32_t mant = v & ((1u << M) - 1);
  uint32_t normal = sign | ((exp + (127 - F::kBias)) << 23) | (mant << (23 - M));
  // Subnormal: mant * 2^(1 - bias - mant bits), exact; float(mant) as
  // (2^23 + mant) - 2^23, without an int-to-float conversion.
  float sub =
      (bitsFloat(0x4b000000u | mant) - 8388608.0f) * bitsFloat(static_cast<uint32_t>(127 + 1 - F::kBias - M) << 23);
  uint32_t r = exp == 0 ? (floatBits(sub) | sign) : normal;
  // e5m2: infinity and NaNs; e4m3 ("fn"): S.1111.111 is NaN, no infinity.
  bool special = F::kInf ? exp == kExpMax : (v & 0x7fu) == 0x7fu;
  uint32_t specialBits = sign | ((F::kInf && mant == 0) ? 0x7f800000u : 0x7fc00000u);
  return bitsFloat(special ? specialBits : r);
}

template <class F>
HETCCL_DEV uint8_t floatToFp8(float x) {
  constexpr int M = F::kMant;
  uint32_t u = floatBits(x);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  // Normal: round the float's mantissa to M bits, nearest-even; a carry
  // moves into the exponent as it should.
  constexpr int kShift = 23 - M;
  uint32_t r = a + ((1u << (kShift - 1)) - 1) + ((a >> kShift) & 1u);
  uint32_t normal = (r >> kShift) - (static_cast<uint32_t>(127 - F::kBias) << M);
  normal = normal > F::kMaxBits ? F::kMaxBits : normal;
  // Subnormal: a multiple of the smallest step, rounded to nearest-even by
  // adding 2^23 (the scaling by 2^(bias - 1 + mant bits) is exact; q < 2^(M+1)).
  float q = bitsFloat(a) * bitsFloat(static_cast<uint32_t>(127 + F::kBias - 1 + M) << 23) + 8388608.0f;
  uint32_t sub = floatBits(q) & 0xffu;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - F::kBias) << 23;
  uint32_t res = a < kMinNormalBits ? sub : normal;
  res = a >= F::kMaxFloatBits ? F::kMaxBits : res;  // saturate (infinity too)
  res = a > 0x7f800000u ? 0x7fu : res;              // NaN
  return static_cast<uint8_t>(sign | res);
}

// ---- element types and their compute types ---------------------------------

struct Half {
  uint16_t v;
};
struct Bf16 {
  uint16_t v;
};
struct E4m3 {
  uint8_t v;
};
struct E5m2 {
  uint8_t v;
};

// Elem<S>: V is the compute type; load/store convert.
template <class S>
struct Elem {
  using V = S;
  static HETCCL_DEV V load(S s) { return s; }
  static HETCCL_DEV S store(V v) { return v; }
};
template <>
struct Elem<Half> {
  using V = float;
  static HETCCL_DEV float load(Half s) { return halfToFloat(s.v); }
  static HETCCL_DEV Half store(float v) { return Half{floatToHalf(v)}; }
};
template <>
struct Elem<Bf16> {
  using V = float;
  static HETCCL_DEV float load(Bf16 s) { return bf16ToFloat(s.v); }
  static HETCCL_DEV Bf16 store(float v) { return Bf16{floatToBf16(v)}; }
};
template <>
struct Elem<E4m3> {
  using V = float;
  static HETCCL_DEV float load(E4m3 s) { return fp8ToFloat<FmtE4M3>(s.v); }
  static HETCCL_DEV E4m3 store(float v) { return E4m3{floatToFp8<FmtE4M3>(v)}; }
};
template <>
struct Elem<E5m2> {
  using V = float;
  static HETCCL_DEV float load(E5m2 s) { return fp8ToFloat<FmtE5M2>(s.v); }
  static HETCCL_DEV E5m2 store(float v) { return E5m2{floatToFp8<FmtE5M2>(v)}; }
};

// Integers wrap (two's complement): sum and product are done unsigned.
template <class V, bool = std::is_integral<V>::value>
struct ArithOf {
  using type = V;
};
template <class V>
struct ArithOf<V, true> {
  using type = typename std::make_unsigned<V>::type;
};

enum { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

template <class V, int K>
HETCCL_DEV V combine(V a, V b) {
  using A = typename ArithOf<V>::type;
  if (K == kSum) return static_cast<V>(static_cast<A>(static_cast<A>(a) + static_cast<A>(b)));
  if (K == kProd) return static_cast<V>(static_cast<A>(static_cast<A>(a) * static_cast<A>(b)));
  if (K == kMax) return (a != a || a > b) ? a : b;  // NaN wins, either side
  return (a != a || a < b) ? a : b;
}

}  // namespace hetccl::codec
