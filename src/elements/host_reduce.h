// Element-wise reductions on host memory. Vectorised per CPU at run time
// (function clones for x86-64-v4, -v3 and baseline, chosen by the loader).
// Low-precision types (half, bfloat16, fp8) combine in float32 and round once
// to the type, to nearest-even; that is also what NCCL's kernels do.
#pragma once

#include <cstddef>

#include "core/datatype.h"

namespace hetccl {

// out[i] = a[i] op b[i]. out may be a or b.
void reduceArrays(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind kind);
// out[i] = in[i] * scalar (PreMulSum, float Avg). Integers: scalar is rounded
// to the nearest integer first, as NCCL does for integer PreMulSum.
void scaleArray(void* out, const void* in, size_t n, DataType dt, double scalar);
// buf[i] /= divisor (integer Avg; truncates toward zero).
void divideArray(void* buf, size_t n, DataType dt, int divisor);

}  // namespace hetccl

namespace hetccl {

// dst = parts[0] op ... op parts[nparts-1], folded left to right, where
// reduce(out, a, b) combines two parts and copy(dst, src) copies one; the
// one order every fold of hetccl uses (host and device forms alike).
template <class Reduce, class Copy>
void foldLeft(void* dst, const void* const* parts, int nparts, void* scratch, Reduce reduce, Copy copy) {
  if (nparts == 1) return copy(dst, parts[0]);
  const void* acc = parts[0];
  for (int j = 1; j < nparts; ++j) {
    void* out = j == nparts - 1 ? dst : scratch;
    reduce(out, acc, parts[j]);
    acc = out;
  }
}

// dst = parts[0] op parts[1] op ... op parts[n-1], folded left to right (a
// fixed order, so every rank that folds the same parts gets the same bits).
// parts may include dst; scratch holds n elements when nparts > 2.
void foldOrdered(void* dst, const void* const* parts, int nparts, size_t n, DataType dt, RedKind kind, void* scratch);

}  // namespace hetccl
