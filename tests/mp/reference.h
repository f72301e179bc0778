// The multi-process suite's view of the collective reference
// (tools/reference/collectives.h): its vocabulary in namespace hmp, and
// EXPECT-style comparisons that record one failure naming the first
// mismatch and the number of mismatches.
#pragma once

#include <string>

#include "hetccl/hetccl.h"
#include "reference/collectives.h"

namespace hmp {

using ref::allColls;
using ref::allOps;
using ref::Check;
using ref::Coll;
using ref::collName;
using ref::Expected;
using ref::fillBytes;
using ref::fillInput;
using ref::inputValue;
using ref::Op;
using ref::opName;
using ref::preMulScalar;
using ref::reduceExpected;
using ref::reduces;
using ref::Values;

void expectReduced(const Check& c, const void* got, const Expected& want, const std::string& what);
void expectBytes(hetcclDataType_t dt, const void* got, const void* want, size_t bytes, const std::string& what);

}  // namespace hmp
