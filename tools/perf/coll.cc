#include "coll.h"

#include "gpu.h"

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
  void* st = a.stream;
  switch (a.coll) {
    case Coll::kAllReduce:
      return checkResult(hetcclAllReduce(send, recv, count, a.dtype, a.redop, comm, st), "hetcclAllReduce", comm);
    case Coll::kAllGather:
      return checkResult(hetcclAllGather(send, recv, count, a.dtype, comm, st), "hetcclAllGather", comm);
    case Coll::kReduceScatter:
      return checkResult(hetcclReduceScatter(send, recv, count, a.dtype, a.redop, comm, st), "hetcclReduceScatter",
                         comm);
    case Coll::kBroadcast:
      return checkResult(hetcclBroadcast(send, recv, count, a.dtype, a.root, comm, st), "hetcclBroadcast", comm);
    case Coll::kReduce:
      return checkResult(hetcclReduce(send, recv, count, a.dtype, a.redop, a.root, comm, st), "hetcclReduce", comm);
    case Coll::kAlltoAll:
      return checkResult(hetcclAlltoAll(send, recv, count, a.dtype, comm, st), "hetcclAlltoAll", comm);
    case Coll::kGather:
      return checkResult(hetcclGather(send, recv, count, a.dtype, a.root, comm, st), "hetcclGather", comm);
    case Coll::kScatter:
      return checkResult(hetcclScatter(send, recv, count, a.dtype, a.root, comm, st), "hetcclScatter", comm);
    case Coll::kSendRecv: {
      const int n = a.nranks, me = a.rank;
      checkResult(hetcclGroupStart(), "hetcclGroupStart", comm);
      hetcclResult_t rs = hetcclSend(send, count, a.dtype, (me + 1) % n, comm, st);
      hetcclResult_t rr = hetcclRecv(recv, count, a.dtype, (me - 1 + n) % n, comm, st);
      // Close the group even when a post failed, so the thread's group state is clean.
      hetcclResult_t re = hetcclGroupEnd();
      checkResult(rs, "hetcclSend", comm);
      checkResult(rr, "hetcclRecv", comm);
      return checkResult(re, "hetcclGroupEnd", comm);
    }
  }
}

namespace {

// One-element AllReduce of the tool's own, through device memory on GPU ranks.
template <typename T>
T toolAllReduce(hetcclComm_t comm, T v, hetcclDataType_t dt, hetcclRedOp_t op, const char* what) {
  T out{};
  Gpu* gpu = toolGpu();
  if (!gpu) {
    checkResult(hetcclAllReduce(&v, &out, 1, dt, op, comm, nullptr), what, comm);
    return out;
  }
  auto* d = static_cast<T*>(gpu->alloc(2 * sizeof(T)));
  try {
    gpu->toDevice(d, &v, sizeof(T));
    checkResult(hetcclAllReduce(d, d + 1, 1, dt, op, comm, gpu->stream()), what, comm);
    gpu->toHost(&out, d + 1, sizeof(T));
  } catch (...) {
    gpu->free(d);
    throw;
  }
  gpu->free(d);
  return out;
}

}  // namespace

void barrier(hetcclComm_t comm) {
  toolAllReduce<float>(comm, 1.0f, hetcclFloat, hetcclSum, "hetcclAllReduce (barrier)");
}

double allReduceMax(hetcclComm_t comm, double v) {
  return toolAllReduce<double>(comm, v, hetcclFloat64, hetcclMax, "hetcclAllReduce (time)");
}

int64_t allReduceSum(hetcclComm_t comm, int64_t v) {
  return toolAllReduce<int64_t>(comm, v, hetcclInt64, hetcclSum, "hetcclAllReduce (#wrong)");
}

uint64_t allReduceU64(hetcclComm_t comm, uint64_t v, hetcclRedOp_t op) {
  return toolAllReduce<uint64_t>(comm, v, hetcclUint64, op, "hetcclAllReduce (hash)");
}

}  // namespace perf
