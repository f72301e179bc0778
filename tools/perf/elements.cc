#include "elements.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace perf {
namespace {

// A binary floating format of at most 16 bits: 1 sign bit, expBits, mantBits.
// ieeeSpecials: the all-ones exponent holds infinity and NaN (half, bfloat16,
// e5m2). Otherwise (e4m3 "fn") only exponent and mantissa all ones is NaN and
// finite overflow saturates.
struct Format {
  int expBits;
  int mantBits;
  bool ieeeSpecials;
  int bias() const { return (1 << (expBits - 1)) - 1; }
  int minExp() const { return 1 - bias(); }
  int maxField() const { return (1 << expBits) - 1; }
  uint32_t nanBits() const {
    return ieeeSpecials ? (static_cast<uint32_t>(maxField()) << mantBits) | (1u << (mantBits - 1))
                        : (static_cast<uint32_t>(maxField()) << mantBits) | ((1u << mantBits) - 1);
  }
  uint32_t maxFiniteBits() const {
    return ieeeSpecials ? (static_cast<uint32_t>(maxField() - 1) << mantBits) | ((1u << mantBits) - 1) : nanBits() - 1;
  }
};

constexpr Format kHalf{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kE4m3{4, 3, false};
constexpr Format kE5m2{5, 2, true};

double decode(uint32_t bits, const Format& f) {
  const int width = f.expBits + f.mantBits;
  const bool neg = (bits >> width) & 1;
  const int field = static_cast<int>((bits >> f.mantBits) & static_cast<uint32_t>(f.maxField()));
  const uint32_t mant = bits & ((1u << f.mantBits) - 1);
  double v;
  if (f.ieeeSpecials && field == f.maxField()) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieeeSpecials && field == f.maxField() && mant == (1u << f.mantBits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(mant), f.minExp() - f.mantBits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mantBits), field - f.bias());
  }
  return neg ? -v : v;
}

uint32_t encode(double x, const Format& f) {
  const int width = f.expBits + f.mantBits;
  const uint32_t sign = std::signbit(x) ? (1u << width) : 0;
  if (std::isnan(x)) return sign | f.nanBits();
  const double maxFinite = decode(f.maxFiniteBits(), f);
  double a = std::fabs(x);
  if (std::isinf(a))
    return f.ieeeSpecials ? sign | (static_cast<uint32_t>(f.maxField()) << f.mantBits) : sign | f.nanBits();
  if (a == 0) return sign;
  // Round a to a multiple of the step (ulp) of its binade; below the smallest
  // normal the step stays that of the subnormals. nearbyint rounds ties to even,
  // and a / step is exact (a power-of-two scaling).
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1;
  if (exp < f.minExp()) exp = f.minExp();
  const double step = std::ldexp(1.0, exp - f.mantBits);
  const double r = std::nearbyint(a / step) * step;
  if (r > maxFinite)
    return f.ieeeSpecials ? sign | (static_cast<uint32_t>(f.maxField()) << f.mantBits) : sign | f.maxFiniteBits();
  if (r == 0) return sign;
  std::frexp(r, &e);
  exp = e - 1;
  if (exp < f.minExp()) return sign | static_cast<uint32_t>(std::ldexp(r, f.mantBits - f.minExp()));
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(std::ldexp(r, -exp) - 1.0, f.mantBits));
  return sign | (static_cast<uint32_t>(exp + f.bias()) << f.mantBits) | mant;
}

template <class T>
T get(const void* p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void put(void* p, T v) {
  memcpy(p, &v, sizeof(T));
}

}  // namespace

uint16_t encodeHalf(double v) { return static_cast<uint16_t>(encode(v, kHalf)); }
double decodeHalf(uint16_t bits) { return decode(bits, kHalf); }
uint16_t encodeBf16(double v) { return static_cast<uint16_t>(encode(v, kBf16)); }
double decodeBf16(uint16_t bits) { return decode(bits, kBf16); }
uint8_t encodeE4m3(double v) { return static_cast<uint8_t>(encode(v, kE4m3)); }
double decodeE4m3(uint8_t bits) { return decode(bits, kE4m3); }
uint8_t encodeE5m2(double v) { return static_cast<uint8_t>(encode(v, kE5m2)); }
double decodeE5m2(uint8_t bits) { return decode(bits, kE5m2); }

size_t typeSize(hetcclDataType_t dt) {
  switch (dt) {
    case hetcclInt8:
    case hetcclUint8:
    case hetcclFloat8e4m3:
    case hetcclFloat8e5m2: return 1;
    case hetcclHalf:
    case hetcclBfloat16: return 2;
    case hetcclInt32:
    case hetcclUint32:
    case hetcclFloat: return 4;
    default: return 8;
  }
}

bool isFloating(hetcclDataType_t dt) {
  return dt == hetcclHalf || dt == hetcclFloat || dt == hetcclDouble || dt == hetcclBfloat16 ||
         dt == hetcclFloat8e4m3 || dt == hetcclFloat8e5m2;
}

bool isUnsignedInt(hetcclDataType_t dt) { return dt == hetcclUint8 || dt == hetcclUint32 || dt == hetcclUint64; }

void storeBits(hetcclDataType_t dt, void* p, uint64_t v) {
  switch (dt) {
    case hetcclInt8:
    case hetcclUint8: put(p, static_cast<uint8_t>(v)); return;
    case hetcclInt32:
    case hetcclUint32: put(p, static_cast<uint32_t>(v)); return;
    default: put(p, v); return;
  }
}

uint64_t loadBits(hetcclDataType_t dt, const void* p) {
  switch (dt) {
    case hetcclInt8: return static_cast<uint64_t>(static_cast<int64_t>(get<int8_t>(p)));
    case hetcclUint8: return get<uint8_t>(p);
    case hetcclInt32: return static_cast<uint64_t>(static_cast<int64_t>(get<int32_t>(p)));
    case hetcclUint32: return get<uint32_t>(p);
    default: return get<uint64_t>(p);
  }
}

void storeValue(hetcclDataType_t dt, void* p, double v) {
  switch (dt) {
    case hetcclHalf: put(p, encodeHalf(v)); return;
    case hetcclBfloat16: put(p, encodeBf16(v)); return;
    case hetcclFloat8e4m3: put(p, encodeE4m3(v)); return;
    case hetcclFloat8e5m2: put(p, encodeE5m2(v)); return;
    case hetcclFloat: put(p, static_cast<float>(v)); return;
    case hetcclDouble: put(p, v); return;
    default: storeBits(dt, p, static_cast<uint64_t>(static_cast<int64_t>(v))); return;
  }
}

double loadValue(hetcclDataType_t dt, const void* p) {
  switch (dt) {
    case hetcclHalf: return decodeHalf(get<uint16_t>(p));
    case hetcclBfloat16: return decodeBf16(get<uint16_t>(p));
    case hetcclFloat8e4m3: return decodeE4m3(get<uint8_t>(p));
    case hetcclFloat8e5m2: return decodeE5m2(get<uint8_t>(p));
    case hetcclFloat: return get<float>(p);
    case hetcclDouble: return get<double>(p);
    case hetcclUint64: return static_cast<double>(get<uint64_t>(p));
    default: return static_cast<double>(static_cast<int64_t>(loadBits(dt, p)));
  }
}

double roundTo(hetcclDataType_t dt, double v) {
  unsigned char buf[8];
  storeValue(dt, buf, v);
  return loadValue(dt, buf);
}

}  // namespace perf
