// The rendezvous of hetcclCommGrow (grow.h).
#include "comm/grow.h"

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

IdContents makeGrowId(Comm& comm, double timeoutS) {
  if (comm.pendingGrowId())
    throwError(hetcclInvalidUsage, "rank " + std::to_string(comm.rank()) +
                                       " already made a grow id that no hetcclCommGrow has taken yet (one at a time)");
  SockAddr at = SockAddr::local();
  IdContents id = startRootServer(at, newIdContents(at), timeoutS);
  id.growFrom = comm.nranks();
  comm.pendingGrowId() = id;
  LOG_INFO(kInit, "rank %d: grow id for a communicator of more than %d ranks, rendezvous at %s", comm.rank(),
           comm.nranks(), id.root.str().c_str());
  return id;
}

namespace {

struct GrowEntry {
  int32_t nranks;
  int32_t rank;
  uint8_t holds;  // this rank made the grow id (hetcclCommGetUniqueId)
  uint8_t gave;   // this rank passed an id
  uint8_t pad[2];
  uint8_t held[HETCCL_UNIQUE_ID_BYTES];
  uint8_t given[HETCCL_UNIQUE_ID_BYTES];
};

// What is wrong with the table of every running rank's arguments; empty
// when nothing is. Every rank computes the same text from the same table.
std::string growTableError(const std::vector<GrowEntry>& all, int parentSize, int* holder) {
  *holder = -1;
  for (int r = 0; r < parentSize; ++r) {
    const GrowEntry& e = all[r];
    if (e.rank != -1)
      return "rank " + std::to_string(r) + " of the running communicator passed rank " + std::to_string(e.rank) +
             " (running ranks pass -1 and keep their numbers)";
    if (e.nranks != all[0].nranks)
      return "rank " + std::to_string(r) + " passed nranks " + std::to_string(e.nranks) + " but rank 0 passed " +
             std::to_string(all[0].nranks) + " (every rank must pass the same)";
    if (e.holds) {
      if (*holder >= 0)
        return "ranks " + std::to_string(*holder) + " and " + std::to_string(r) +
               " both made a grow id (one rank calls hetcclCommGetUniqueId)";
      *holder = r;
    }
  }
  if (all[0].nranks <= parentSize || all[0].nranks > kMaxRanks)
    return "nranks " + std::to_string(all[0].nranks) + " must be larger than the running communicator's " +
           std::to_string(parentSize) + " ranks (and at most " + std::to_string(kMaxRanks) + ")";
  if (*holder < 0) return "no rank of the running communicator made a grow id (call hetcclCommGetUniqueId on one)";
  for (int r = 0; r < parentSize; ++r)
    if (all[r].gave && memcmp(all[r].given, all[*holder].held, HETCCL_UNIQUE_ID_BYTES) != 0)
      return "rank " + std::to_string(r) + " passed an id other than the one rank " + std::to_string(*holder) +
             " made for this grow";
  return "";
}

}  // namespace

DerivedRank growRendezvous(Comm& parent, int nranks, int rank, const hetcclUniqueId* given) {
  const int n = parent.nranks(), me = parent.rank();
  std::vector<GrowEntry> all(n);
  GrowEntry& mine = all[me];
  memset(&mine, 0, sizeof(mine));
  mine.nranks = nranks;
  mine.rank = rank;
  std::optional<IdContents> held = parent.pendingGrowId();
  parent.pendingGrowId().reset();  // taken, whatever happens next
  if (held) {
    mine.holds = 1;
    hetcclUniqueId uid = encodeUniqueId(*held);
    memcpy(mine.held, uid.internal, HETCCL_UNIQUE_ID_BYTES);
  }
  if (given) {
    mine.gave = 1;
    memcpy(mine.given, given->internal, HETCCL_UNIQUE_ID_BYTES);
  }
  parent.bootstrap().allGather(all.data(), sizeof(GrowEntry));
  int holder = -1;
  const std::string wrong = growTableError(all, n, &holder);
  hetcclUniqueId uid;
  if (holder >= 0) memcpy(uid.internal, all[holder].held, HETCCL_UNIQUE_ID_BYTES);
  if (!wrong.empty()) {
    if (holder == me)
      reportInitFailure(*held, me, all[me].nranks, "hetcclCommGrow: " + wrong, parent.options().timeoutS);
    throwError(hetcclInvalidArgument, "hetcclCommGrow: " + wrong);
  }
  DerivedRank out;
  out.id = decodeUniqueId(uid);
  out.nranks = nranks;
  out.rank = me;
  LOG_INFO(kInit, "rank %d: grow from %d to %d ranks (id made by rank %d)", me, n, nranks, holder);
  return out;
}

void checkGrowJoin(const IdContents& id, int nranks, int rank, double timeoutS) {
  std::string wrong;
  if (id.growFrom <= 0)
    wrong = "the id is not a grow id (it was made by hetcclGetUniqueId: join with hetcclCommInitRank instead)";
  else if (nranks <= id.growFrom || nranks > kMaxRanks)
    wrong = "nranks " + std::to_string(nranks) + " must be larger than the running communicator's " +
            std::to_string(id.growFrom) + " ranks";
  else if (rank < id.growFrom || rank >= nranks)
    wrong = "new rank " + std::to_string(rank) + " must be in [" + std::to_string(id.growFrom) + ", " +
            std::to_string(nranks) + ") (the running ranks keep 0 to " + std::to_string(id.growFrom - 1) + ")";
  if (wrong.empty()) return;
  if (id.growFrom > 0 && rank >= 0 && rank < nranks)
    reportInitFailure(id, rank, nranks, "hetcclCommGrow: " + wrong, timeoutS);
  throwError(hetcclInvalidArgument, "hetcclCommGrow: " + wrong);
}

}  // namespace hetccl
