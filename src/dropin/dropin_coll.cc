// The drop-in's reduction ops, collectives, point-to-point and group calls:
// NCCL's signatures onto hetccl's (same type, op and result values).
#include <vector>

#include "dropin/dropin.h"

using namespace hetccl;
using namespace hetccl::dropin;

namespace {

ncclResult_t code(hetcclResult_t r) { return static_cast<ncclResult_t>(r); }
hetcclDataType_t dtype(int x) { return static_cast<hetcclDataType_t>(x); }
hetcclRedOp_t redop(int x) { return static_cast<hetcclRedOp_t>(x); }

}  // namespace

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(int* op, void* scalar, int dt, int residence, ncclComm_t comm) {
  return code(hetcclRedOpCreatePreMulSum(reinterpret_cast<hetcclRedOp_t*>(op), scalar, dtype(dt),
                                         static_cast<hetcclScalarResidence_t>(residence), comm));
}
ncclResult_t ncclRedOpDestroy(int op, ncclComm_t comm) { return code(hetcclRedOpDestroy(redop(op), comm)); }

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int dt, int op, ncclComm_t c, void* st) {
  return code(hetcclAllReduce(s, r, n, dtype(dt), redop(op), c, st));
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return code(hetcclBroadcast(s, r, n, dtype(dt), root, c, st));
}
ncclResult_t ncclBcast(void* buf, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return code(hetcclBroadcast(buf, buf, n, dtype(dt), root, c, st));
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, int dt, int op, int root, ncclComm_t c, void* st) {
  return code(hetcclReduce(s, r, n, dtype(dt), redop(op), root, c, st));
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {
  return code(hetcclAllGather(s, r, n, dtype(dt), c, st));
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int dt, int op, ncclComm_t c, void* st) {
  return code(hetcclReduceScatter(s, r, n, dtype(dt), redop(op), c, st));
}
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {
  return code(hetcclAlltoAll(s, r, n, dtype(dt), c, st));
}
ncclResult_t ncclAllToAll(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {  // RCCL's spelling
  return code(hetcclAlltoAll(s, r, n, dtype(dt), c, st));
}
ncclResult_t ncclGather(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return code(hetcclGather(s, r, n, dtype(dt), root, c, st));
}
ncclResult_t ncclScatter(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return code(hetcclScatter(s, r, n, dtype(dt), root, c, st));
}
ncclResult_t ncclSend(const void* s, size_t n, int dt, int peer, ncclComm_t c, void* st) {
  return code(hetcclSend(s, n, dtype(dt), peer, c, st));
}
ncclResult_t ncclRecv(void* r, size_t n, int dt, int peer, ncclComm_t c, void* st) {
  return code(hetcclRecv(r, n, dtype(dt), peer, c, st));
}

// RCCL's AlltoAllv: counts and displacements in elements, per peer; one
// group of sends and receives.
ncclResult_t ncclAllToAllv(const void* s, const size_t sendcounts[], const size_t sdispls[], void* r,
                           const size_t recvcounts[], const size_t rdispls[], int dt, ncclComm_t c, void* st) {
  hetcclResult_t res = guard(c, "ncclAllToAllv", [&] {
    HETCCL_CHECK_ARG(sendcounts && sdispls && recvcounts && rdispls, "a count or displacement array is NULL");
    int n = 0;
    if (hetcclCommCount(c, &n) != hetcclSuccess) throw Error(hetcclInvalidUsage, hetcclGetLastError(c));
    const size_t es = dataTypeValid(dt) ? dataTypeSize(dtype(dt)) : 1;
    hetcclGroupStart();
    hetcclResult_t first = hetcclSuccess;
    for (int p = 0; p < n; ++p) {
      hetcclResult_t a = hetcclSend(static_cast<const char*>(s) + sdispls[p] * es, sendcounts[p], dtype(dt), p, c, st);
      hetcclResult_t b = hetcclRecv(static_cast<char*>(r) + rdispls[p] * es, recvcounts[p], dtype(dt), p, c, st);
      if (first == hetcclSuccess) first = a != hetcclSuccess ? a : b;
    }
    hetcclResult_t end = hetcclGroupEnd();
    if (first != hetcclSuccess) throw Error(first, hetcclGetLastError(c));
    if (end != hetcclSuccess && end != hetcclInProgress) throw Error(end, hetcclGetLastError(nullptr));
  });
  return code(res);
}

ncclResult_t ncclGroupStart(void) { return code(hetcclGroupStart()); }
ncclResult_t ncclGroupEnd(void) { return code(hetcclGroupEnd()); }

// NCCL's cost model estimates the pending group's time without running it;
// hetccl's plans have no such model.
ncclResult_t ncclGroupSimulateEnd(void*) {
  return code(guard(nullptr, "ncclGroupSimulateEnd", [&] {
    refuse("ncclGroupSimulateEnd", "(NCCL's cost model has no hetccl counterpart; end the group with ncclGroupEnd)");
  }));
}

}  // extern "C"
