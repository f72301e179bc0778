#include "api/comm_create.h"

#include "api/guard.h"
#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"

#include <mutex>

namespace hetccl {

GroupState& threadGroup() {
  thread_local GroupState g;
  return g;
}

hetcclComm* createComm(const IdContents& id, int nranks, int rank, const CommOptions& opts) {
  HETCCL_CHECK_ARG(nranks >= 1 && nranks <= kMaxRanks, "nranks " + std::to_string(nranks) + " out of range");
  HETCCL_CHECK_ARG(rank >= 0 && rank < nranks,
                   "rank " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
  hetcclComm* c = nullptr;
  try {
    c = new hetcclComm(nranks, rank, opts);
  } catch (const Error& e) {
    // Bad settings on this rank: the others learn it from the root at once.
    reportInitFailure(id, rank, nranks, e.what(), opts.timeoutS);
    throw;
  }
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

CommOptions readOptionsOrReport(const hetcclConfig_t* config, const IdContents& id, int rank, int nranks) {
  try {
    return readOptions(config);
  } catch (const Error& e) {
    if (rank >= 0 && rank < nranks) reportInitFailure(id, rank, nranks, e.what(), 30);
    throw;
  }
}

void startLauncherRoot(const IdContents& id, bool weakSecret) {
  double timeoutS = 300;
  try {
    timeoutS = static_cast<double>(settings::kTimeoutS.get());
  } catch (const Error&) {  // reported with the rest of the settings below
  }
  SockAddr at = id.root;
  try {
    startRootServer(at, id, timeoutS);
  } catch (const Error& e) {
    // MASTER_ADDR need not be an address of this host (NAT, a load
    // balancer's name): then every address at the agreed port.
    LOG_INFO(kBootstrap, "rendezvous root: cannot listen on %s (%s); listening on every address", at.str().c_str(),
             e.what());
    at = SockAddr::parse(id.root.ss.ss_family == AF_INET6 ? "[::]:0" : "0.0.0.0:0");
    at.setPort(id.root.port());
    startRootServer(at, id, timeoutS);
  }
  static std::once_flag warned;
  if (weakSecret && !at.isLoopback())
    std::call_once(warned, [&] {
      LOG_WARN(kBootstrap,
               "the job secret is derived from launcher variables, which others can guess, and the "
               "rendezvous listens on %s, which other hosts can reach: set HETCCL_JOB_SECRET (or "
               "HETCCL_JOB_SECRET_FILE) to a secret of the job's own",
               at.str().c_str());
    });
}

hetcclResult_t startedResult(hetcclResult_t r, const hetcclComm* comm) {
  // Inside a group the init waits for the group's end, which says so.
  if (threadGroup().depth > 0) return r;
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
