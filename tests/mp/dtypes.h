// The test suite's own model of hetccl's element types: sizes, conversions
// to and from double, and rounding. Written from the formats' definitions
// (IEEE binary16/32/64, bfloat16, OCP fp8 e4m3 "fn" and e5m2), not from the
// library's code, so that the reference results are independent of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hetccl/hetccl.h"

namespace hmp {

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

const TypeInfo& typeInfo(hetcclDataType_t dt);
// Every hetccl data type, in enum order.
const std::vector<hetcclDataType_t>& allTypes();

// Nearest value of the type, ties to even; floats overflow to inf (or
// saturate for fp8). Integers: x must already be an integer in range.
double roundTo(hetcclDataType_t dt, double x);
// Writes x, which must be exactly representable (checked: aborts the test
// process on a test bug), as one element of dt.
void storeElem(hetcclDataType_t dt, void* p, double x);
// Reads one element as a double (64-bit integers beyond 2^53 are rounded:
// compare integers by their bytes, not through this).
double loadElem(hetcclDataType_t dt, const void* p);
// Unit roundoff of a float type: 2^-precision.
double unitRoundoff(hetcclDataType_t dt);
// Smallest positive (subnormal) value of a float type.
double minSubnormal(hetcclDataType_t dt);

// A short text of one element for messages: value and raw bytes.
std::string describeElem(hetcclDataType_t dt, const void* p);

}  // namespace hmp
