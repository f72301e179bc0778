// Conversions of the low-precision element types to and from float.
// Rounding: to nearest, ties to even. fp8 follows the OCP formats NVIDIA
// uses (e4m3 "fn": no infinity, max 448; e5m2: IEEE-like, max 57344); values
// beyond the largest finite saturate to it ("satfinite", as NCCL's fp8
// reductions do); NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "elements/codecs.h"

namespace hetccl {

// float16 and bfloat16: the code the device kernels compile too
// (elements/codecs.h). NaN keeps its bits through both conversions,
// signalling ones included: the conversion instructions (and libgcc's)
// would quiet a signalling NaN, and whether they run depends on the
// compiler's flags, so max/min of a NaN would differ between builds. A
// float NaN whose payload does not reach the half's 10 bits becomes a quiet
// NaN.
using codec::bf16ToFloat;
using codec::floatToBf16;
using codec::floatToHalf;
using codec::halfToFloat;

float fp8e4m3ToFloat(uint8_t v);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
uint8_t floatToFp8e5m2(float f);

// One element of any hetccl data type (as an int value: hetcclDataType_t), widened.
double elementToDouble(const void* p, int dt);

}  // namespace hetccl
