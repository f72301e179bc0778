// The reference model of hetccl's element types that hetccl-perf's checks,
// the multi-process suite and the soak test compute their expected results
// with: sizes, conversions to and from double, rounding. Written from the
// formats' definitions (IEEE binary16/32/64, bfloat16, OCP fp8 e4m3 "fn" and
// e5m2), never from the library's code, so that the reference results do not
// depend on the library under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <hetccl/hetccl.h>

namespace ref {

struct TypeInfo {
  hetcclDataType_t dt;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;     // integers; floats are signed too
  int precision;     // floats: significand bits including the implicit one
  int minExp;        // floats: exponent of the smallest normal number
  double maxFinite;  // floats: the largest finite value
  bool saturates;    // fp8: results beyond maxFinite become +-maxFinite ("satfinite"), not inf
};

// Throws std::logic_error on a data type outside the enum (a test bug).
const TypeInfo& typeInfo(hetcclDataType_t dt);
// Every hetccl data type, in enum order.
const std::vector<hetcclDataType_t>& allTypes();
inline size_t typeSize(hetcclDataType_t dt) { return typeInfo(dt).size; }
inline bool isFloating(hetcclDataType_t dt) { return typeInfo(dt).isFloat; }
inline bool isUnsignedInt(hetcclDataType_t dt) { return !typeInfo(dt).isFloat && !typeInfo(dt).isSigned; }

// Nearest value of the type, ties to even; floats overflow to inf (fp8:
// saturate), NaN stays NaN. Integers: x unchanged.
double roundTo(hetcclDataType_t dt, double x);
// Writes x as one element of dt. x must be exactly representable (an
// integer in range, a value of the float type, or NaN/inf where the type has
// them); anything else is a test bug (std::logic_error).
void storeElem(hetcclDataType_t dt, void* p, double x);
// Writes x rounded to the type (floats, roundTo) or converted through int64
// and cut to the type's width (integers: two's complement wrap).
void storeRounded(hetcclDataType_t dt, void* p, double x);
// Reads one element as a double (64-bit integers beyond 2^53 are rounded:
// compare integers by their bytes, or through loadBits).
double loadElem(hetcclDataType_t dt, const void* p);
// Integer types only: the low bits of v, and the element sign- or
// zero-extended to 64 bits.
void storeBits(hetcclDataType_t dt, void* p, uint64_t v);
uint64_t loadBits(hetcclDataType_t dt, const void* p);

// Unit roundoff of a float type: 2^-precision.
double unitRoundoff(hetcclDataType_t dt);
// Smallest positive (subnormal) value of a float type.
double minSubnormal(hetcclDataType_t dt);

// A short text of one element for messages: value and raw bytes.
std::string describeElem(hetcclDataType_t dt, const void* p);

}  // namespace ref
