// Reference data: a deterministic input per (rank, index) and, computed on
// each rank alone in double precision, the output every collective must give.
#ifndef HETCCL_TOOLS_PERF_CHECK_H_
#define HETCCL_TOOLS_PERF_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "coll.h"
#include "options.h"

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

  // Relative tolerance of averages in the type (other results are exact, see check.cc).
  static double avgTolerance(hetcclDataType_t dt);

 private:
  int smallInt(int rank, size_t idx) const;  // the input as a small integer
  double stored(int v) const { return stored_[v + 1]; }
  const unsigned char* encoded(int v) const { return encoded_[v + 1]; }
  int64_t wrongReduced(int rank, const Geometry& g, const unsigned char* recv) const;
  int64_t wrongMoved(int rank, const Geometry& g, const unsigned char* recv) const;

  Coll coll_;
  hetcclDataType_t dt_;
  hetcclRedOp_t op_;
  int nranks_;
  int root_;
  size_t es_;
  size_t stride_;                 // sum, avg, prod: rank r contributes to idx when (r + idx) % stride_ == 0
  double stored_[18];             // value of the small integers -1..16 once stored in the type
  unsigned char encoded_[18][8];  // and their bytes
};

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_CHECK_H_
