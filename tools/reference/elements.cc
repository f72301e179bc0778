#include "elements.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ref {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

const TypeInfo kTypes[] = {
    {hetcclInt8, "int8", 1, false, true, 0, 0, 0, false},
    {hetcclUint8, "uint8", 1, false, false, 0, 0, 0, false},
    {hetcclInt32, "int32", 4, false, true, 0, 0, 0, false},
    {hetcclUint32, "uint32", 4, false, false, 0, 0, 0, false},
    {hetcclInt64, "int64", 8, false, true, 0, 0, 0, false},
    {hetcclUint64, "uint64", 8, false, false, 0, 0, 0, false},
    {hetcclFloat16, "float16", 2, true, true, 11, -14, 65504.0, false},
    {hetcclFloat32, "float32", 4, true, true, 24, -126, FLT_MAX, false},
    {hetcclFloat64, "float64", 8, true, true, 53, -1022, DBL_MAX, false},
    {hetcclBfloat16, "bfloat16", 2, true, true, 8, -126, (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127), false},
    {hetcclFloat8e4m3, "fp8e4m3", 1, true, true, 4, -6, 448.0, true},
    {hetcclFloat8e5m2, "fp8e5m2", 1, true, true, 3, -14, 57344.0, true},
};

[[noreturn]] void testBug(const std::string& what) { throw std::logic_error("test bug: " + what); }

// A binary floating format of at most 16 bits: a sign bit, expBits and
// mantBits. ieeeSpecials: the all-ones exponent holds infinity and NaN (half,
// bfloat16, e5m2); otherwise (e4m3 "fn") only exponent and mantissa all ones
// is NaN and there is no infinity.
struct Format {
  int expBits;
  int mantBits;
  bool ieeeSpecials;
  int bias() const { return (1 << (expBits - 1)) - 1; }
  int minExp() const { return 1 - bias(); }
  uint32_t maxField() const { return (1u << expBits) - 1; }
  uint32_t mantMask() const { return (1u << mantBits) - 1; }
  uint32_t nanBits() const { return (maxField() << mantBits) | (ieeeSpecials ? 1u << (mantBits - 1) : mantMask()); }
};

constexpr Format kHalf{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kE4m3{4, 3, false};
constexpr Format kE5m2{5, 2, true};

const Format* narrowFormat(hetcclDataType_t dt) {
  switch (dt) {
    case hetcclFloat16: return &kHalf;
    case hetcclBfloat16: return &kBf16;
    case hetcclFloat8e4m3: return &kE4m3;
    case hetcclFloat8e5m2: return &kE5m2;
    default: return nullptr;
  }
}

double decode(uint32_t bits, const Format& f) {
  const bool neg = (bits >> (f.expBits + f.mantBits)) & 1;
  const uint32_t field = (bits >> f.mantBits) & f.maxField(), mant = bits & f.mantMask();
  double v;
  if (f.ieeeSpecials && field == f.maxField())
    v = mant ? std::numeric_limits<double>::quiet_NaN() : kInf;
  else if (!f.ieeeSpecials && field == f.maxField() && mant == f.mantMask())
    v = std::numeric_limits<double>::quiet_NaN();
  else if (field == 0)
    v = std::ldexp(static_cast<double>(mant), f.minExp() - f.mantBits);
  else
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -f.mantBits), static_cast<int>(field) - f.bias());
  return neg ? -v : v;
}

// The encoding of x, a value of the format (already rounded), NaN or an
// infinity (NaN in a format without one).
uint32_t encode(double x, const Format& f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.expBits + f.mantBits) : 0;
  if (std::isnan(x)) return sign | f.nanBits();
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | (f.ieeeSpecials ? f.maxField() << f.mantBits : f.nanBits());
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int exp = e - 1;
  if (exp < f.minExp()) return sign | static_cast<uint32_t>(std::ldexp(a, f.mantBits - f.minExp()));
  const uint32_t mant = static_cast<uint32_t>(std::ldexp(std::ldexp(a, -exp) - 1.0, f.mantBits));
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

template <class T>
bool fitsInteger(double x) {
  return x == std::trunc(x) && x >= static_cast<double>(std::numeric_limits<T>::min()) &&
         x <= static_cast<double>(std::numeric_limits<T>::max());
}

bool representableInteger(hetcclDataType_t dt, double x) {
  switch (dt) {
    case hetcclInt8: return fitsInteger<int8_t>(x);
    case hetcclUint8: return fitsInteger<uint8_t>(x);
    case hetcclInt32: return fitsInteger<int32_t>(x);
    case hetcclUint32: return fitsInteger<uint32_t>(x);
    case hetcclInt64: return fitsInteger<int64_t>(x);
    default: return fitsInteger<uint64_t>(x);
  }
}

// A float x already of the type (or NaN/inf) into its bytes.
void storeFloat(hetcclDataType_t dt, void* p, double x) {
  if (const Format* f = narrowFormat(dt)) {
    const uint32_t bits = encode(x, *f);
    if (typeSize(dt) == 1)
      put(p, static_cast<uint8_t>(bits));
    else
      put(p, static_cast<uint16_t>(bits));
  } else if (dt == hetcclFloat32) {
    put(p, static_cast<float>(x));
  } else {
    put(p, x);
  }
}

}  // namespace

const TypeInfo& typeInfo(hetcclDataType_t dt) {
  if (dt < 0 || dt >= hetcclNumTypes) testBug("bad data type " + std::to_string(dt));
  return kTypes[dt];
}

const std::vector<hetcclDataType_t>& allTypes() {
  static const std::vector<hetcclDataType_t> all = [] {
    std::vector<hetcclDataType_t> v;
    for (const TypeInfo& t : kTypes) v.push_back(t.dt);
    return v;
  }();
  return all;
}

double roundTo(hetcclDataType_t dt, double x) {
  const TypeInfo& t = typeInfo(dt);
  if (!t.isFloat || dt == hetcclFloat64 || x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);                           // |x| in [2^(e-1), 2^e)
  const int lead = std::max(e - 1, t.minExp);  // below the normals the quantum stays fixed
  const double quantum = std::ldexp(1.0, lead - (t.precision - 1));
  const double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode: nearest, ties to even
  if (std::fabs(r) > t.maxFinite) return std::copysign(t.saturates ? t.maxFinite : kInf, x);
  return r;
}

void storeElem(hetcclDataType_t dt, void* p, double x) {
  const TypeInfo& t = typeInfo(dt);
  if (!t.isFloat) {
    if (!representableInteger(dt, x)) testBug("value " + std::to_string(x) + " is not an integer of " + t.name);
    storeRounded(dt, p, x);
    return;
  }
  if ((!std::isnan(x) && roundTo(dt, x) != x) || (std::isinf(x) && dt == hetcclFloat8e4m3))
    testBug(std::string("value ") + std::to_string(x) + " is not representable in " + t.name);
  storeFloat(dt, p, x);
}

void storeRounded(hetcclDataType_t dt, void* p, double x) {
  if (typeInfo(dt).isFloat) return storeFloat(dt, p, roundTo(dt, x));
  const uint64_t bits = x >= 0x1p63 ? static_cast<uint64_t>(x) : static_cast<uint64_t>(static_cast<int64_t>(x));
  storeBits(dt, p, bits);
}

double loadElem(hetcclDataType_t dt, const void* p) {
  if (const Format* f = narrowFormat(dt)) return decode(typeSize(dt) == 1 ? get<uint8_t>(p) : get<uint16_t>(p), *f);
  switch (dt) {
    case hetcclFloat32: return get<float>(p);
    case hetcclFloat64: return get<double>(p);
    case hetcclUint64: return static_cast<double>(get<uint64_t>(p));
    default: return static_cast<double>(static_cast<int64_t>(loadBits(dt, p)));
  }
}

void storeBits(hetcclDataType_t dt, void* p, uint64_t v) {
  switch (typeInfo(dt).size) {
    case 1: put(p, static_cast<uint8_t>(v)); return;
    case 4: put(p, static_cast<uint32_t>(v)); return;
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

double unitRoundoff(hetcclDataType_t dt) { return std::ldexp(1.0, -typeInfo(dt).precision); }

double minSubnormal(hetcclDataType_t dt) {
  const TypeInfo& t = typeInfo(dt);
  return std::ldexp(1.0, t.minExp - (t.precision - 1));
}

std::string describeElem(hetcclDataType_t dt, const void* p) {
  const TypeInfo& t = typeInfo(dt);
  char buf[96];
  int n;
  if (t.isFloat)
    n = snprintf(buf, sizeof(buf), "%.17g", loadElem(dt, p));
  else if (t.isSigned)
    n = snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(loadBits(dt, p)));
  else
    n = snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(loadBits(dt, p)));
  n += snprintf(buf + n, sizeof(buf) - n, " (0x");
  for (size_t b = t.size; b-- > 0;) n += snprintf(buf + n, sizeof(buf) - n, "%02x", static_cast<const uint8_t*>(p)[b]);
  snprintf(buf + n, sizeof(buf) - n, ")");
  return buf;
}

}  // namespace ref
