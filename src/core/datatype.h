// Element types and reduction ops as hetccl uses them inside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hetccl/hetccl.h"

namespace hetccl {

using DataType = hetcclDataType_t;

size_t dataTypeSize(DataType dt);
const char* dataTypeName(DataType dt);
bool dataTypeValid(int dt);
bool dataTypeIsFloat(DataType dt);
// Accepts hetccl-perf/nccl-tests names: int8 uint8 int32 uint32 int64 uint64
// half/float16 float/float32 double/float64 bfloat16 fp8_e4m3 fp8_e5m2.
// Returns false on an unknown name.
bool parseDataType(const std::string& name, DataType* dt);

// The arithmetic of one op, after PreMulSum/Avg are resolved.
enum class RedKind : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

// A reduction as executed: the pairwise combine plus the pre/post steps that
// Avg and PreMulSum add. Floats: Avg = PreMulSum(1/nranks); integers: Avg =
// Sum then divide (truncating) by nranks, as NCCL does.
struct ReduceOp {
  ReduceOp() = default;
  ReduceOp(RedKind k) : kind(k) {}  // NOLINT: a plain kind is a plain op
  bool plain() const { return !preMul && !postDiv; }
  RedKind kind = RedKind::kSum;
  bool preMul = false;  // multiply each rank's input by scalar before combining
  double scalar = 1.0;
  // PreMulSum whose scalar lives in memory (NCCL's ncclScalarDevice): an
  // element of the call's type, read when the call runs, not when the op
  // was made. Device memory on GPU ranks (a vendor library reads it there;
  // the staged path copies it in stream order); host memory on host ranks.
  // Plans read `scalar`, which runCollective sets from it.
  const void* scalarAt = nullptr;
  bool postDiv = false;  // divide the final sum by divisor (integer Avg)
  int divisor = 1;
  hetcclRedOp_t userOp = hetcclSum;  // as the caller named it (for messages)
};

const char* redKindName(RedKind k);
const char* redOpName(hetcclRedOp_t op);  // "sum", ..., "premulsum"
bool parseRedOp(const std::string& name, hetcclRedOp_t* op);

}  // namespace hetccl
