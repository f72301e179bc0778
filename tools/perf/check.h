// hetccl-perf's check of a call's results: the inputs of every rank and the
// output each must get come from the shared collective reference
// (tools/reference/collectives.h, the multi-process suite's too), computed on
// each rank alone in double precision: exact small integers for sum, prod and
// avg (at most 8 ranks feed any element, whatever the rank count), values over
// each type's range for max and min, hashed bytes for the data-moving
// collectives. Results compare exactly, except a float avg over a rank count
// that is not a power of two (within the bound of its roundings).
#ifndef HETCCL_TOOLS_PERF_CHECK_H_
#define HETCCL_TOOLS_PERF_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "coll.h"
#include "options.h"
#include "reference/collectives.h"

namespace perf {

class Reference {
 public:
  Reference(Coll coll, hetcclDataType_t dt, hetcclRedOp_t op, int nranks, int root);

  // Writes rank's input elements [0, elems) to p.
  void fill(int rank, void* p, size_t elems) const;
  // Elements of p (rank's input of elems elements) that differ from fill's.
  int64_t countChangedInput(int rank, const void* p, size_t elems) const;
  // Elements of rank's recvbuff that differ from the expected output; 0 where
  // the collective defines no output on this rank (reduce, gather off the root).
  int64_t countWrongOutput(int rank, const Geometry& g, const void* recv) const;

 private:
  // Fills elements [first, first + n) of rank's input stream into out.
  void input(int rank, size_t first, size_t n, void* out) const;
  int64_t wrongReduced(int rank, const Geometry& g, const unsigned char* recv) const;
  int64_t wrongMoved(int rank, const Geometry& g, const unsigned char* recv) const;

  Coll coll_;
  int nranks_;
  size_t es_;
  ref::Check check_;  // type, op, root and the exact values' stride
};

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_CHECK_H_
