// Communicators made from another: split, shrink and grow (comm_create.h).
// The rendezvous are comm/split_shrink.h's and comm/grow.h's; here: the API's
// checks and the creation.
#include "api/comm_create.h"
#include "api/guard.h"
#include "comm/grow.h"
#include "comm/split_shrink.h"
#include "core/error.h"
#include "core/settings.h"
#include "transport/routed.h"

namespace hetccl {

CommOptions inheritedOptions(const hetcclComm& parent) {
  CommOptions o = parent.options();
  // The parent's choice per link class, in the setting's own form, both
  // classes even where the parent is on one host: a derived communicator
  // may span other hosts (a grow adds ranks on new ones). Where the parent
  // left the choice between hosts to auto, so does the child, as its new
  // ranks do with the same setting (auto's choice is made by every rank
  // together).
  const std::string asked = o.transport.empty() ? settings::kTransport.get() : o.transport;
  const std::string inter =
      parseTransportChoice(asked, "HETCCL_TRANSPORT").inter == "auto" ? "auto" : parent.interTransport();
  o.transport = parent.intraTransport() == inter ? inter : "intra=" + parent.intraTransport() + ",inter=" + inter;
  o.groupName.clear();
  o.joinTimeoutS = 0;
  return o;
}

hetcclComm* splitComm(hetcclComm* comm, int color, int key, CommOptions opts) {
  checkReady(comm);
  HETCCL_CHECK_ARG(color >= 0 || color == HETCCL_SPLIT_NOCOLOR, "color must be >= 0 or HETCCL_SPLIT_NOCOLOR");
  ExclusiveUse use(*comm);
  // Split uses the bootstrap ring on this thread: queued non-blocking work
  // (which may use the ring too) finishes first.
  comm->proxy().drain();
  if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(comm->rank()).name;
  if (!opts.site) opts.site = comm->site();
  if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
  DerivedRank d = splitRendezvous(*comm, color, key, opts.timeoutS);
  if (d.rank < 0) return nullptr;
  return createComm(d.id, d.nranks, d.rank, opts);
}

hetcclComm* shrinkComm(hetcclComm* comm, std::vector<int> excluded, CommOptions opts, int flags) {
  checkReady(comm);
  HETCCL_CHECK_ARG((flags & ~HETCCL_SHRINK_ABORT) == 0,
                   "shrinkFlags " + std::to_string(flags) + " has bits other than HETCCL_SHRINK_ABORT");
  std::vector<int> survivors = shrinkSurvivors(*comm, std::move(excluded));  // checked before anything is aborted
  if (flags & HETCCL_SHRINK_ABORT) {
    // Every survivor ends the parent's work; peers waiting on this rank learn at once.
    comm->fail(hetcclRemoteError, "the communicator's work was aborted by a shrink");
    comm->abort();
  } else {
    comm->proxy().drain();
  }
  if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(comm->rank()).name;
  if (!opts.site) opts.site = comm->site();
  if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
  DerivedRank d = shrinkRendezvous(*comm, survivors, opts.timeoutS);
  opts.joinTimeoutS = shrinkJoinS(opts.timeoutS);
  return createComm(d.id, d.nranks, d.rank, opts);
}

hetcclUniqueId growId(hetcclComm* comm) {
  checkReady(comm);
  ExclusiveUse use(*comm);
  return encodeUniqueId(makeGrowId(*comm, comm->options().timeoutS));
}

hetcclComm* growComm(hetcclComm* comm, int nranks, int rank, const hetcclUniqueId* id, CommOptions opts) {
  checkReady(comm);
  ExclusiveUse use(*comm);
  // The grow's table travels over the parent's bootstrap on this thread.
  comm->proxy().drain();
  if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(comm->rank()).name;
  if (!opts.site) opts.site = comm->site();
  if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
  DerivedRank d = growRendezvous(*comm, nranks, rank, id);
  return createComm(d.id, d.nranks, d.rank, opts);
}

hetcclComm* joinGrownComm(const IdContents& id, int nranks, int rank, const CommOptions& opts) {
  checkGrowJoin(id, nranks, rank, opts.timeoutS);
  return createComm(id, nranks, rank, opts);
}

}  // namespace hetccl
