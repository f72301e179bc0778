// Inputs and expected results of collective checks, computed in double
// precision from the element model (elements.h), never through the library:
// the multi-process suite's checker (tests/mp/checks.h) and hetccl-perf's
// (tools/perf/check.h) both use them.
//
// Reductions follow hetccl's documented semantics:
//  - sum, prod, max, min combine element-wise; integers wrap (inputs here
//    never overflow); low-precision floats combine in float32 and round to
//    nearest-even after each combine; fp8 saturates at its largest finite.
//  - avg on floats = PreMulSum(1/nranks): each rank's input is multiplied by
//    1/nranks and rounded to the element type, then summed. avg on integers
//    = sum, then division by nranks truncating toward zero.
//  - PreMulSum(s): each input multiplied by s and rounded to the type, then
//    summed. The tests use s = 0.5 for floats and s = 3 for integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <hetccl/hetccl.h>

#include "elements.h"

namespace ref {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv
};
enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

// How inputs are chosen.
enum class Values {
  // Per op: small integers (sum, avg, premulsum), mostly 1 with a few 2 and
  // -1 (prod), values over the whole range (max, min). Every partial result
  // is exact in every type, so results compare exactly whatever the order of
  // the combines (except float avg over a rank count that is not a power of
  // two, where 1/n is inexact: compared within the kRandom bound).
  kExact,
  // Uniform in [-1, 1), rounded to the type (float types; sum, avg,
  // premulsum): compared within the bound of recursive summation,
  // (n-1) * u * sum|x_i|, u the unit roundoff of the type.
  kRandom,
};

struct Check {
  Coll coll = Coll::kAllReduce;
  hetcclDataType_t dt = hetcclFloat32;
  Op op = Op::kSum;  // reducing collectives only
  size_t count = 0;  // the API's count argument
  bool inPlace = false;
  int root = 0;  // Broadcast, Reduce, Gather, Scatter
  Values values = Values::kExact;
  uint64_t seed = 1;
  // kExact sums, averages and products: element i takes a nonzero (sum) or
  // non-one (product) input only from ranks r with (r + i) % activeEvery == 0,
  // so that at most 8 ranks feed each element whatever the rank count
  // (exactStride); 1 (every rank) up to 8 ranks.
  int activeEvery = 1;
  std::string label() const;  // "AllReduce float32 sum count=7 in-place root=1"
};

// The activeEvery that keeps kExact results exact on nranks ranks.
int exactStride(int nranks);

const char* collName(Coll c);
const char* opName(Op op);
bool reduces(Coll c);
const std::vector<Coll>& allColls();
const std::vector<Op>& allOps();
// The PreMulSum scalar the tests use for dt (0.5 for floats, 3 for integers).
double preMulScalar(hetcclDataType_t dt);

// Element `i` of rank `rank`'s input to a reducing check.
double inputValue(const Check& c, int rank, size_t i);
// Stores elements [first, first+n) of rank's input into out.
void fillInput(const Check& c, int rank, size_t first, size_t n, void* out);
// Data-movement checks: bytes that depend on (seed, rank, offset).
void fillBytes(uint64_t seed, int rank, size_t offset, void* out, size_t bytes);

// Expected results of a reduction over `nranks` ranks of inputs
// [first, first+n): value, and the allowed distance (0 = exact).
struct Expected {
  std::vector<double> value;
  std::vector<double> bound;
};
Expected reduceExpected(const Check& c, int nranks, size_t first, size_t n);

// Elements of got (n elements of the type) that differ from want: bytes for
// integers (doubles would round 64-bit values), value within the bound for
// floats (NaN is always wrong). *first: the first wrong one.
size_t countWrongReduced(const Check& c, const void* got, const Expected& want, size_t* first);

}  // namespace ref
