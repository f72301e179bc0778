#include "elements/lowp.h"

#include <array>
#include <limits>

namespace hetccl {
namespace {

struct Fp8Format {
  int mantBits;
  int bias;
  float maxFinite;
  uint8_t maxFiniteBits;
  uint8_t nanBits;
  bool hasInf;
};
constexpr Fp8Format kE4M3{3, 7, 448.0f, 0x7e, 0x7f, false};
constexpr Fp8Format kE5M2{2, 15, 57344.0f, 0x7b, 0x7f, true};

float decode(uint8_t v, const Fp8Format& f) {
  int sign = v >> 7;
  int exp = (v >> f.mantBits) & ((1 << (7 - f.mantBits)) - 1);
  int mant = v & ((1 << f.mantBits) - 1);
  int expMax = (1 << (7 - f.mantBits)) - 1;
  float out;
  if (f.hasInf && exp == expMax) {
    out = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (!f.hasInf && exp == expMax && mant == (1 << f.mantBits) - 1) {
    out = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mantBits);
  } else {
    out = std::ldexp(1.0f + static_cast<float>(mant) / (1 << f.mantBits), exp - f.bias);
  }
  return sign ? -out : out;
}

uint8_t encode(float x, const Fp8Format& f) {
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | f.nanBits;
  float a = std::fabs(x);
  if (a >= f.maxFinite) return sign | f.maxFiniteBits;
  float minNormal = std::ldexp(1.0f, 1 - f.bias);
  if (a < minNormal) {
    // Subnormal: a multiple of the smallest step; q == 2^mantBits is the
    // smallest normal, whose encoding is the same integer.
    float q = std::nearbyint(std::ldexp(a, f.bias - 1 + f.mantBits));
    return sign | static_cast<uint8_t>(q);
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;                       // a = (2m) * 2^e, 2m in [1, 2)
  float q = std::nearbyint((2 * m - 1) * (1 << f.mantBits));
  if (q >= (1 << f.mantBits)) {
    q = 0;
    e += 1;
  }
  uint32_t bits = (static_cast<uint32_t>(e + f.bias) << f.mantBits) | static_cast<uint32_t>(q);
  if (bits > f.maxFiniteBits) bits = f.maxFiniteBits;
  return sign | static_cast<uint8_t>(bits);
}

template <const Fp8Format& F>
const std::array<float, 256>& table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> r{};
    for (int i = 0; i < 256; ++i) r[i] = decode(static_cast<uint8_t>(i), F);
    return r;
  }();
  return t;
}

}  // namespace

float fp8e4m3ToFloat(uint8_t v) { return table<kE4M3>()[v]; }
float fp8e5m2ToFloat(uint8_t v) { return table<kE5M2>()[v]; }
uint8_t floatToFp8e4m3(float f) { return encode(f, kE4M3); }
uint8_t floatToFp8e5m2(float f) { return encode(f, kE5M2); }

double elementToDouble(const void* p, int dt) {
  auto load = [p](auto v) {
    memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dt) {
    case 0: return load(int8_t{});
    case 1: return load(uint8_t{});
    case 2: return load(int32_t{});
    case 3: return load(uint32_t{});
    case 4: return static_cast<double>(load(int64_t{}));
    case 5: return static_cast<double>(load(uint64_t{}));
    case 6: return halfToFloat(load(uint16_t{}));
    case 7: return load(float{});
    case 8: return load(double{});
    case 9: return bf16ToFloat(load(uint16_t{}));
    case 10: return fp8e4m3ToFloat(load(uint8_t{}));
    case 11: return fp8e5m2ToFloat(load(uint8_t{}));
    default: return 0;
  }
}

}  // namespace hetccl
