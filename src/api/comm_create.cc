#include "api/comm_create.h"

#include "api/guard.h"
#include "bootstrap/root.h"
#include "core/error.h"

namespace hetccl {

GroupState& threadGroup() {
  thread_local GroupState g;
  return g;
}

hetcclComm* createComm(const IdContents& id, int nranks, int rank, const CommOptions& opts) {
  HETCCL_CHECK_ARG(nranks >= 1 && nranks <= kMaxRanks, "nranks " + std::to_string(nranks) + " out of range");
  HETCCL_CHECK_ARG(rank >= 0 && rank < nranks,
                   "rank " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
  auto* c = new hetcclComm(nranks, rank, opts);
  if (threadGroup().depth > 0) {
    registerComm(c);
    threadGroup().inits.push_back(PendingInit{c, id});
    return c;
  }
  if (!opts.blocking) {
    // Non-blocking: init runs on the proxy; the caller polls
    // hetcclCommGetAsyncError until it stops saying hetcclInProgress.
    registerComm(c);
    c->proxy().submit([c, id] { c->init(id); });
    return c;
  }
  try {
    c->init(id);
  } catch (...) {
    delete c;
    throw;
  }
  registerComm(c);
  return c;
}

hetcclResult_t startedResult(hetcclResult_t r, const hetcclComm* comm) {
  return (r == hetcclSuccess && comm && !comm->options().blocking) ? hetcclInProgress : r;
}

bool runPendingInits(const std::vector<PendingInit>& inits) {
  bool anyNonBlocking = false;
  for (const PendingInit& p : inits) {
    hetcclComm* c = p.comm;
    IdContents id = p.id;
    c->proxy().submit([c, id] { c->init(id); });
    anyNonBlocking = anyNonBlocking || !c->options().blocking;
  }
  for (const PendingInit& p : inits) {
    if (!p.comm->options().blocking) continue;
    p.comm->proxy().drain();
    hetcclResult_t r = p.comm->proxy().status();
    if (r != hetcclSuccess)
      throwError(r, "communicator init (rank " + std::to_string(p.comm->rank()) + " of " +
                        std::to_string(p.comm->nranks()) + "): " + p.comm->proxy().errorText());
  }
  return anyNonBlocking;
}

}  // namespace hetccl
