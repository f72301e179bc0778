// One row of the table: time a size out of place and in place, then check it.
#ifndef HETCCL_TOOLS_PERF_BENCH_H_
#define HETCCL_TOOLS_PERF_BENCH_H_

#include <cstddef>
#include <cstdint>

#include "check.h"
#include "coll.h"
#include "options.h"

namespace perf {

struct Result {
  double timeUs = 0;   // per iteration, the slowest rank's
  double algbw = 0;    // GB/s
  double busbw = 0;    // GB/s
  int64_t wrong = -1;  // summed over ranks; -1: not checked
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  Result oop, ip;
};

class Bench {
 public:
  Bench(const Options& o, hetcclComm_t comm, int rank, int nranks);
  // Untimed calls at one size, out of place and in place, as nccl-tests makes
  // at the largest and the smallest size before the first row: the library's
  // staging memory is then touched before anything is timed.
  void warmup(size_t bytes);
  Row measure(size_t bytes);

 private:
  struct Buffers;
  Result run(const Geometry& g, bool inPlace, Buffers& b);
  void prepare(const Geometry& g, bool inPlace, Buffers& b);
  // Wrong elements on this rank after the checked call.
  int64_t localWrong(const Geometry& g, bool inPlace, Buffers& b);

  const Options& o_;
  CallArgs call_;
  int rank_;
  int nranks_;
  size_t es_;
  Reference ref_;
};

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_BENCH_H_
