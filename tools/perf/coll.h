// Per collective: buffer shapes for a size in bytes (nccl-tests' rules) and
// the call itself.
#ifndef HETCCL_TOOLS_PERF_COLL_H_
#define HETCCL_TOOLS_PERF_COLL_H_

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "options.h"

namespace perf {

struct Geometry {
  size_t count = 0;      // the count argument of the call (per rank for allgather, reducescatter, ...)
  size_t sendElems = 0;  // elements of sendbuff
  size_t recvElems = 0;  // elements of recvbuff
  // In place: one buffer of inPlaceElems, sendbuff and recvbuff at these offsets.
  size_t inPlaceElems = 0;
  size_t sendOffset = 0;
  size_t recvOffset = 0;
  size_t bytes = 0;        // bytes for the bandwidths and the size column
  double busFactor = 1.0;  // busbw = algbw * busFactor
};

Geometry geometryFor(Coll c, size_t bytes, size_t typeSize, int nranks, int rank);

// What a collective call on one rank needs.
struct CallArgs {
  Coll coll;
  hetcclDataType_t dtype;
  hetcclRedOp_t redop;
  int root;
  hetcclComm_t comm;
  int rank;  // of comm, for sendrecv's ring
  int nranks;
  void* stream = nullptr;  // GPU ranks: the stream the calls go on
};

// Runs the collective once; throws LibError when the library fails.
void runColl(const CallArgs& a, const void* send, void* recv, size_t count);

// A failed hetccl call: the call, the result and the library's last error.
struct LibError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void checkResult(hetcclResult_t r, const char* call, hetcclComm_t comm);

// Collectives used by the tool itself, outside the measured calls.
void barrier(hetcclComm_t comm);
double allReduceMax(hetcclComm_t comm, double v);
int64_t allReduceSum(hetcclComm_t comm, int64_t v);
uint64_t allReduceU64(hetcclComm_t comm, uint64_t v, hetcclRedOp_t op);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_COLL_H_
