// Conversions of the low-precision element types to and from float.
// Rounding: to nearest, ties to even. fp8 follows the OCP formats NVIDIA
// uses (e4m3 "fn": no infinity, max 448; e5m2: IEEE-like, max 57344); values
// beyond the largest finite saturate to it ("satfinite", as NCCL's fp8
// reductions do); NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hetccl {

inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// NaN keeps its bits through both conversions, signalling ones included,
// as the device kernels keep them (src/kernels/reduce_kernels.cu): the
// conversion instructions (and libgcc's) would quiet a signalling NaN, and
// whether they run depends on the compiler's flags, so max/min of a NaN
// would differ between builds. A float NaN whose payload does not reach the
// half's 10 bits becomes a quiet NaN.
inline float halfToFloat(uint16_t h) {
  if ((h & 0x7fffu) > 0x7c00u) {
    uint32_t bits =
        (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u | (static_cast<uint32_t>(h & 0x3ffu) << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  _Float16 v;
  memcpy(&v, &h, 2);
  return static_cast<float>(v);
}

inline uint16_t floatToHalf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    uint32_t mant = (u >> 13) & 0x3ffu;
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7c00u | (mant ? mant : 0x200u));
  }
  _Float16 v = static_cast<_Float16>(f);
  uint16_t h;
  memcpy(&h, &v, 2);
  return h;
}

float fp8e4m3ToFloat(uint8_t v);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
uint8_t floatToFp8e5m2(float f);

// One element of any hetccl data type (as an int value: hetcclDataType_t), widened.
double elementToDouble(const void* p, int dt);

}  // namespace hetccl
