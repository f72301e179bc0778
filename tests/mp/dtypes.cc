#include "dtypes.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

namespace hmp {
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

// OCP fp8 from its bit fields. e4m3 ("fn") has no infinity and one NaN
// mantissa pattern at the top exponent; e5m2 has IEEE infinities and NaNs.
double decodeFp8(uint8_t b, int expBits, int mantBits, bool ieeeSpecials) {
  const int sign = b >> 7, e = (b >> mantBits) & ((1 << expBits) - 1), m = b & ((1 << mantBits) - 1);
  const int bias = (1 << (expBits - 1)) - 1, eMax = (1 << expBits) - 1;
  double v;
  if (ieeeSpecials && e == eMax)
    v = m ? std::numeric_limits<double>::quiet_NaN() : kInf;
  else if (!ieeeSpecials && e == eMax && m == (1 << mantBits) - 1)
    v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0)
    v = std::ldexp(m, 1 - bias - mantBits);
  else
    v = std::ldexp(1.0 + std::ldexp(m, -mantBits), e - bias);
  return sign ? -v : v;
}

struct Fp8Table {
  double value[256];
  std::map<double, uint8_t> code;  // exact value -> encoding (+0 for zero)
  Fp8Table(int expBits, int mantBits, bool ieee) {
    for (int b = 0; b < 256; ++b) {
      value[b] = decodeFp8(static_cast<uint8_t>(b), expBits, mantBits, ieee);
      if (!std::isnan(value[b])) code.emplace(value[b], static_cast<uint8_t>(b));  // first wins: +0 before -0
    }
  }
};
const Fp8Table& e4m3() {
  static const Fp8Table t(4, 3, false);
  return t;
}
const Fp8Table& e5m2() {
  static const Fp8Table t(5, 2, true);
  return t;
}

[[noreturn]] void testBug(const std::string& what) { throw std::logic_error("test bug: " + what); }

template <class T>
void storeInt(void* p, double x) {
  if (x != std::trunc(x) || x < static_cast<double>(std::numeric_limits<T>::min()) ||
      x > static_cast<double>(std::numeric_limits<T>::max()))
    testBug("value " + std::to_string(x) + " is not an integer of the type");
  T v = static_cast<T>(x);
  memcpy(p, &v, sizeof(T));
}

template <class T>
double loadInt(const void* p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
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
  if (!t.isFloat) return x;
  if (x == 0 || !std::isfinite(x)) return x;
  if (dt == hetcclFloat64) return x;
  int e;
  std::frexp(x, &e);                     // |x| in [2^(e-1), 2^e)
  int lead = std::max(e - 1, t.minExp);  // below the normals the quantum stays fixed
  double quantum = std::ldexp(1.0, lead - (t.precision - 1));
  double r = std::nearbyint(x / quantum) * quantum;  // default rounding mode: nearest, ties to even
  if (std::fabs(r) > t.maxFinite) return std::copysign(t.saturates ? t.maxFinite : kInf, x);
  return r;
}

void storeElem(hetcclDataType_t dt, void* p, double x) {
  const TypeInfo& t = typeInfo(dt);
  if (t.isFloat && !std::isnan(x) && roundTo(dt, x) != x)
    testBug(std::string("value ") + std::to_string(x) + " is not representable in " + t.name);
  switch (dt) {
    case hetcclInt8: return storeInt<int8_t>(p, x);
    case hetcclUint8: return storeInt<uint8_t>(p, x);
    case hetcclInt32: return storeInt<int32_t>(p, x);
    case hetcclUint32: return storeInt<uint32_t>(p, x);
    case hetcclInt64: return storeInt<int64_t>(p, x);
    case hetcclUint64: return storeInt<uint64_t>(p, x);
    case hetcclFloat16: {
      _Float16 h = static_cast<_Float16>(x);  // exact: x is representable
      memcpy(p, &h, 2);
      return;
    }
    case hetcclFloat32: {
      float f = static_cast<float>(x);
      memcpy(p, &f, 4);
      return;
    }
    case hetcclFloat64: memcpy(p, &x, 8); return;
    case hetcclBfloat16: {
      float f = static_cast<float>(x);  // exact, and its low 16 bits are zero
      uint32_t bits;
      memcpy(&bits, &f, 4);
      uint16_t h = static_cast<uint16_t>(bits >> 16);
      memcpy(p, &h, 2);
      return;
    }
    case hetcclFloat8e4m3:
    case hetcclFloat8e5m2: {
      const Fp8Table& tab = dt == hetcclFloat8e4m3 ? e4m3() : e5m2();
      auto it = tab.code.find(x);
      if (it == tab.code.end()) testBug("no fp8 code for " + std::to_string(x));
      *static_cast<uint8_t*>(p) = it->second;
      return;
    }
    default: testBug("storeElem: bad type");
  }
}

double loadElem(hetcclDataType_t dt, const void* p) {
  switch (dt) {
    case hetcclInt8: return loadInt<int8_t>(p);
    case hetcclUint8: return loadInt<uint8_t>(p);
    case hetcclInt32: return loadInt<int32_t>(p);
    case hetcclUint32: return loadInt<uint32_t>(p);
    case hetcclInt64: return loadInt<int64_t>(p);
    case hetcclUint64: return loadInt<uint64_t>(p);
    case hetcclFloat16: {
      _Float16 h;
      memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case hetcclFloat32: {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
    case hetcclFloat64: {
      double d;
      memcpy(&d, p, 8);
      return d;
    }
    case hetcclBfloat16: {
      uint16_t h;
      memcpy(&h, p, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16;
      float f;
      memcpy(&f, &bits, 4);
      return f;
    }
    case hetcclFloat8e4m3: return e4m3().value[*static_cast<const uint8_t*>(p)];
    case hetcclFloat8e5m2: return e5m2().value[*static_cast<const uint8_t*>(p)];
    default: testBug("loadElem: bad type");
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
  if (t.isFloat) {
    n = snprintf(buf, sizeof(buf), "%.17g", loadElem(dt, p));
  } else if (t.isSigned) {
    int64_t v = 0;
    if (t.size == 1)
      v = *static_cast<const int8_t*>(p);
    else if (t.size == 4) {
      int32_t w;
      memcpy(&w, p, 4);
      v = w;
    } else
      memcpy(&v, p, 8);
    n = snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  } else {
    uint64_t v = 0;
    memcpy(&v, p, t.size);  // little-endian
    n = snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(v));
  }
  n += snprintf(buf + n, sizeof(buf) - n, " (0x");
  for (size_t b = t.size; b-- > 0;) n += snprintf(buf + n, sizeof(buf) - n, "%02x", static_cast<const uint8_t*>(p)[b]);
  snprintf(buf + n, sizeof(buf) - n, ")");
  return buf;
}

}  // namespace hmp
