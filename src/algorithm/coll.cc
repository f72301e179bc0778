#include "algorithm/coll.h"

#include "elements/lowp.h"
#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "observe/observed.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

CallExtent callExtent(int nranks, int rank, const CollArgs& a) {
  const size_t b = a.count * dataTypeSize(a.dt), all = b * static_cast<size_t>(nranks);
  const bool root = a.root == rank;
  CallExtent e;
  switch (a.kind) {
    case CollKind::kAllReduce: e = {b, b, true}; break;
    case CollKind::kBroadcast: e = {root ? b : 0, b, true}; break;
    case CollKind::kReduce: e = {b, root ? b : 0, root}; break;
    case CollKind::kAllGather: e = {b, all, true}; break;
    case CollKind::kReduceScatter: e = {all, b, true}; break;
    case CollKind::kAlltoAll: e = {all, all, true}; break;
    case CollKind::kGather: e = {b, root ? all : 0, root}; break;
    case CollKind::kScatter: e = {root ? all : 0, b, true}; break;
    case CollKind::kSendRecv: e = a.isSend ? CallExtent{b, 0, false} : CallExtent{0, b, true}; break;
  }
  if (!a.send) e.sendBytes = 0;
  if (!a.recv) e.recvBytes = 0, e.writesRecv = false;
  return e;
}

MsgTag makeTag(uint64_t seq, const CollArgs& a) {
  MsgTag t;
  t.seq = seq;
  t.count = a.count;
  t.coll = static_cast<uint16_t>(a.kind);
  t.dtype = static_cast<uint8_t>(a.dt);
  bool reduces = a.kind == CollKind::kAllReduce || a.kind == CollKind::kReduce || a.kind == CollKind::kReduceScatter;
  t.op = reduces ? static_cast<uint8_t>(a.op.kind) : 0;
  t.root = (a.kind == CollKind::kBroadcast || a.kind == CollKind::kReduce || a.kind == CollKind::kGather ||
            a.kind == CollKind::kScatter)
               ? a.root
               : -1;
  return t;
}

namespace {

// HETCCL_CHECK_MISMATCH=1: every rank compares its call with every other's
// before any data moves (one small allgather over the bootstrap per call), so
// a mismatch inside group steps, which vendor libraries do not detect, is an
// error naming both sides.
void checkSameCall(Comm& c, const MsgTag& mine) {
  std::vector<MsgTag> all(c.nranks());
  all[c.rank()] = mine;
  c.bootstrap().allGather(all.data(), sizeof(MsgTag));
  for (int r = 0; r < c.nranks(); ++r) {
    MsgTag other = all[r];
    other.bytes = mine.bytes;
    if (!other.sameCall(mine))
      throwError(hetcclInvalidUsage, "collective mismatch: rank " + std::to_string(c.rank()) + " is in " +
                                         mine.describe() + " but rank " + std::to_string(r) + " is in " +
                                         all[r].describe());
  }
}

bool rooted(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather || k == CollKind::kScatter;
}

// Rooted collectives: ranks that disagree on the root need not exchange a
// single message (two ranks that both think they are the root of a
// Broadcast only send), so tags alone cannot catch it. Before any data
// moves, every rank sends its call's tag to the next rank and checks the
// previous one's: if the ranks disagree, some neighbours do, and they fail
// at once (failing the communicator, which tells the others).
void checkNeighbours(Comm& c, const MsgTag& tag) {
  const int n = c.nranks(), me = c.rank();
  std::vector<Xfer> x{Xfer::send((me + 1) % n, nullptr, 0, tag), Xfer::recv((me + n - 1) % n, nullptr, 0, tag)};
  c.transport().run(x);
}

}  // namespace

PlanContext hostPlan(Comm& c) { return PlanContext{c, c.planBackend()}; }

void runCollective(const PlanContext& base, const CollArgs& call) {
  Comm& c = base.comm;
  CollArgs a = call;
  // PreMulSum with the scalar in memory: read now, when the call runs (GPU
  // ranks' staged calls point it at the pinned copy made in stream order).
  if (a.op.scalarAt) a.op.scalar = elementToDouble(a.op.scalarAt, a.dt);
  // The plans scale a PreMulSum's input and divide an average's result
  // themselves, around the steps (observe/observed.h).
  if (a.op.preMul || a.op.postDiv) noteLocalWork();
  PlanContext p = base;
  p.tag = makeTag(c.nextSeq(), a);
  c.callTag() = p.tag;  // what the host backend's group steps carry (BackendContext::callTag)
  LOG_TRACE(kColl, "%s", p.tag.describe().c_str());
  if (c.checkMismatch())
    checkSameCall(c, p.tag);
  else if (rooted(a.kind) && c.nranks() > 1)
    checkNeighbours(c, p.tag);
  switch (a.kind) {
    case CollKind::kAllReduce: return runAllReduce(p, a);
    case CollKind::kBroadcast: return runBroadcast(p, a);
    case CollKind::kReduce: return runReduce(p, a);
    case CollKind::kAllGather: return runAllGather(p, a);
    case CollKind::kReduceScatter: return runReduceScatter(p, a);
    case CollKind::kAlltoAll: return runAlltoAll(p, a);
    case CollKind::kGather: return runGather(p, a);
    case CollKind::kScatter: return runScatter(p, a);
    case CollKind::kSendRecv: break;
  }
  throwError(hetcclInternalError, "runCollective: not a collective");
}

void runCalls(const PlanContext& p, const std::vector<CollArgs>& calls) {
  std::vector<CollArgs> p2p;
  for (const CollArgs& a : calls) {
    if (a.kind == CollKind::kSendRecv)
      p2p.push_back(a);
    else
      runCollective(p, a);
  }
  if (!p2p.empty()) runPointToPoint(p, p2p.data(), p2p.size());
}

}  // namespace hetccl
