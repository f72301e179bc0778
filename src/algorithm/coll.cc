#include "algorithm/coll.h"

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

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

}  // namespace

void runCollective(Comm& c, const CollArgs& a) {
  c.callTag() = makeTag(c.nextSeq(), a);
  LOG_TRACE(kColl, "%s", c.callTag().describe().c_str());
  if (c.checkMismatch()) checkSameCall(c, c.callTag());
  switch (a.kind) {
    case CollKind::kAllReduce: return runAllReduce(c, a);
    case CollKind::kBroadcast: return runBroadcast(c, a);
    case CollKind::kReduce: return runReduce(c, a);
    case CollKind::kAllGather: return runAllGather(c, a);
    case CollKind::kReduceScatter: return runReduceScatter(c, a);
    case CollKind::kAlltoAll: return runAlltoAll(c, a);
    case CollKind::kGather: return runGather(c, a);
    case CollKind::kScatter: return runScatter(c, a);
    case CollKind::kSendRecv: break;
  }
  throwError(hetcclInternalError, "runCollective: not a collective");
}

}  // namespace hetccl
