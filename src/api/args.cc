// Checks of a collective call's arguments, before anything runs (args.h).
#include "api/args.h"

#include "api/guard.h"
#include "core/error.h"

namespace hetccl {
namespace {

// Elements moved per rank pair times this factor must fit in size_t bytes.
size_t countFactor(CollKind k, int nranks) {
  switch (k) {
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
    case CollKind::kGather:
    case CollKind::kScatter: return static_cast<size_t>(nranks);
    default: return 1;
  }
}

}  // namespace

void checkArgs(hetcclComm* comm, CollArgs& a, hetcclRedOp_t op, bool reduces) {
  HETCCL_CHECK_ARG(dataTypeValid(a.dt),
                   "datatype " + std::to_string(static_cast<int>(a.dt)) + " is not a hetccl data type (0-11)");
  const int n = comm->nranks(), me = comm->rank();
  // es * factor cannot overflow (at most 8 bytes times the ranks); a
  // multiply checked for overflow instead of two divisions a call.
  const size_t es = dataTypeSize(a.dt), factor = countFactor(a.kind, n);
  size_t bytes = 0;
  HETCCL_CHECK_ARG(!__builtin_mul_overflow(a.count, es * factor, &bytes),
                   "count " + std::to_string(a.count) + " overflows the byte size of the buffers");
  HETCCL_CHECK_ARG(a.count <= (size_t{1} << 48), "count " + std::to_string(a.count) + " is larger than 2^48 elements");
  if (reduces) a.op = comm->resolveOp(op, a.dt);
  bool rooted = a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce || a.kind == CollKind::kGather ||
                a.kind == CollKind::kScatter;
  if (rooted)
    HETCCL_CHECK_ARG(a.root >= 0 && a.root < n,
                     "root " + std::to_string(a.root) + " out of range [0, " + std::to_string(n) + ")");
  if (a.kind == CollKind::kSendRecv)
    HETCCL_CHECK_ARG(a.peer >= 0 && a.peer < n,
                     "peer " + std::to_string(a.peer) + " out of range [0, " + std::to_string(n) + ")");
  HETCCL_CHECK_ARG(a.stream == nullptr || !comm->device().synchronous(),
                   "stream must be NULL on a host rank (device kind host)");
  if (a.count == 0) return;
  checkBufferKinds(*comm, a);
  bool isRoot = a.root == me;
  bool needSend = true, needRecv = true;
  switch (a.kind) {
    case CollKind::kBroadcast: needSend = isRoot; break;
    case CollKind::kReduce: needRecv = isRoot; break;
    case CollKind::kGather: needRecv = isRoot; break;
    case CollKind::kScatter: needSend = isRoot; break;
    default: break;
  }
  if (a.kind != CollKind::kSendRecv) {
    HETCCL_CHECK_ARG(!needSend || a.send, "sendbuff is NULL with count " + std::to_string(a.count));
    HETCCL_CHECK_ARG(!needRecv || a.recv, "recvbuff is NULL with count " + std::to_string(a.count));
  }
}

void checkBufferKinds(Comm& c, const CollArgs& a) {
  CallExtent e = callExtent(c.nranks(), c.rank(), a);
  DeviceRuntime& d = c.device();
  // In one group the vendor library alone touches the buffers: a buffer seen
  // before is not asked about again (DeviceRuntime::bufferKind). Where
  // hetccl copies or folds them itself, every call asks.
  const bool handedOn = c.ready() && c.topo().ngroups() == 1;
  auto check = [&](const void* p, size_t bytes, const char* name) {
    if (!p || bytes == 0) return;
    MemKind k = handedOn ? d.bufferKind(p) : d.pointerKind(p);
    if (c.isGpuRank()) {
      if (k == MemKind::kDevice) return;
      throwError(hetcclInvalidArgument, std::string(name) + " is " + memKindName(k) + ", but this rank is a " +
                                            d.kind() + " rank: its buffers must be memory of its device " +
                                            std::to_string(d.deviceId()));
    }
    if (k == MemKind::kOtherDevice)
      throwError(hetcclInvalidArgument, std::string(name) +
                                            " is GPU memory, but this rank is a host rank (device kind host): pass "
                                            "host memory, or create the communicator with device cuda or hip");
  };
  check(a.send, e.sendBytes, "sendbuff");
  if (a.recv != a.send || e.sendBytes == 0) check(a.recv, e.recvBytes, "recvbuff");  // in place: one pointer query
}

}  // namespace hetccl
