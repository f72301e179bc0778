// Element encodings of every hetccl data type, written here so the reference
// results do not depend on the library under test. Conversions to the
// floating types round to nearest, ties to even.
#ifndef HETCCL_TOOLS_PERF_ELEMENTS_H_
#define HETCCL_TOOLS_PERF_ELEMENTS_H_

#include <cstddef>
#include <cstdint>

#include <hetccl/hetccl.h>

namespace perf {

size_t typeSize(hetcclDataType_t dt);
bool isFloating(hetcclDataType_t dt);
bool isUnsignedInt(hetcclDataType_t dt);

// Floating types: v rounded to the type (NaN stays NaN; e4m3, which has no
// infinity, saturates at +-448). Integer types: v converted through int64 and
// truncated to the type's width (two's complement wrap).
void storeValue(hetcclDataType_t dt, void* p, double v);
// Integer types only: the low bits of v (wrapping as the library does).
void storeBits(hetcclDataType_t dt, void* p, uint64_t v);
double loadValue(hetcclDataType_t dt, const void* p);
// Integer types only: the element sign- or zero-extended to 64 bits.
uint64_t loadBits(hetcclDataType_t dt, const void* p);

// The value v takes once stored in a floating type dt.
double roundTo(hetcclDataType_t dt, double v);

// Raw encodings of the narrow floating types.
uint16_t encodeHalf(double v);
double decodeHalf(uint16_t bits);
uint16_t encodeBf16(double v);
double decodeBf16(uint16_t bits);
uint8_t encodeE4m3(double v);
double decodeE4m3(uint8_t bits);
uint8_t encodeE5m2(double v);
double decodeE5m2(uint8_t bits);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_ELEMENTS_H_
