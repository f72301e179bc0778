#include "coll.h"

namespace perf {

Geometry geometryFor(Coll c, size_t bytes, size_t typeSize, int nranks, int rank) {
  Geometry g;
  const size_t n = static_cast<size_t>(nranks), r = static_cast<size_t>(rank);
  const double spread = nranks > 0 ? static_cast<double>(nranks - 1) / nranks : 0.0;
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      g.count = bytes / typeSize;
      g.sendElems = g.recvElems = g.inPlaceElems = g.count;
      g.bytes = g.count * typeSize;
      g.busFactor = c == Coll::kAllReduce ? 2.0 * spread : 1.0;
      return g;
    case Coll::kAllGather:
    case Coll::kGather:
      g.count = bytes / typeSize / n;
      g.sendElems = g.count;
      g.recvElems = g.inPlaceElems = g.count * n;
      g.sendOffset = r * g.count;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      g.count = bytes / typeSize / n;
      g.sendElems = g.inPlaceElems = g.count * n;
      g.recvElems = g.count;
      g.recvOffset = r * g.count;
      break;
    case Coll::kAlltoAll:
      g.count = bytes / typeSize / n;
      g.sendElems = g.recvElems = g.inPlaceElems = g.count * n;
      break;
  }
  g.bytes = g.count * n * typeSize;
  g.busFactor = spread;
  return g;
}

void checkResult(hetcclResult_t r, const char* call, hetcclComm_t comm) {
  if (r == hetcclSuccess) return;
  const char* last = hetcclGetLastError(comm);
  throw LibError(std::string(call) + " failed: " + hetcclGetErrorString(r) + (last && *last ? ": " : "") +
                 (last ? last : ""));
}

void runColl(const CallArgs& a, const void* send, void* recv, size_t count) {
  hetcclComm_t comm = a.comm;
  switch (a.coll) {
    case Coll::kAllReduce:
      return checkResult(hetcclAllReduce(send, recv, count, a.dtype, a.redop, comm, nullptr), "hetcclAllReduce", comm);
    case Coll::kAllGather:
      return checkResult(hetcclAllGather(send, recv, count, a.dtype, comm, nullptr), "hetcclAllGather", comm);
    case Coll::kReduceScatter:
      return checkResult(hetcclReduceScatter(send, recv, count, a.dtype, a.redop, comm, nullptr),
                         "hetcclReduceScatter", comm);
    case Coll::kBroadcast:
      return checkResult(hetcclBroadcast(send, recv, count, a.dtype, a.root, comm, nullptr), "hetcclBroadcast", comm);
    case Coll::kReduce:
      return checkResult(hetcclReduce(send, recv, count, a.dtype, a.redop, a.root, comm, nullptr), "hetcclReduce",
                         comm);
    case Coll::kAlltoAll:
      return checkResult(hetcclAlltoAll(send, recv, count, a.dtype, comm, nullptr), "hetcclAlltoAll", comm);
    case Coll::kGather:
      return checkResult(hetcclGather(send, recv, count, a.dtype, a.root, comm, nullptr), "hetcclGather", comm);
    case Coll::kScatter:
      return checkResult(hetcclScatter(send, recv, count, a.dtype, a.root, comm, nullptr), "hetcclScatter", comm);
    case Coll::kSendRecv: {
      const int n = a.nranks, me = a.rank;
      checkResult(hetcclGroupStart(), "hetcclGroupStart", comm);
      hetcclResult_t rs = hetcclSend(send, count, a.dtype, (me + 1) % n, comm, nullptr);
      hetcclResult_t rr = hetcclRecv(recv, count, a.dtype, (me - 1 + n) % n, comm, nullptr);
      // Close the group even when a post failed, so the thread's group state is clean.
      hetcclResult_t re = hetcclGroupEnd();
      checkResult(rs, "hetcclSend", comm);
      checkResult(rr, "hetcclRecv", comm);
      return checkResult(re, "hetcclGroupEnd", comm);
    }
  }
}

void barrier(hetcclComm_t comm) {
  float one = 1.0f, out = 0.0f;
  checkResult(hetcclAllReduce(&one, &out, 1, hetcclFloat, hetcclSum, comm, nullptr), "hetcclAllReduce (barrier)", comm);
}

double allReduceMax(hetcclComm_t comm, double v) {
  double out = 0;
  checkResult(hetcclAllReduce(&v, &out, 1, hetcclFloat64, hetcclMax, comm, nullptr), "hetcclAllReduce (time)", comm);
  return out;
}

int64_t allReduceSum(hetcclComm_t comm, int64_t v) {
  int64_t out = 0;
  checkResult(hetcclAllReduce(&v, &out, 1, hetcclInt64, hetcclSum, comm, nullptr), "hetcclAllReduce (#wrong)", comm);
  return out;
}

uint64_t allReduceU64(hetcclComm_t comm, uint64_t v, hetcclRedOp_t op) {
  uint64_t out = 0;
  checkResult(hetcclAllReduce(&v, &out, 1, hetcclUint64, op, comm, nullptr), "hetcclAllReduce (hash)", comm);
  return out;
}

}  // namespace perf
