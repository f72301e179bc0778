#include "api/guard.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/log.h"

namespace hetccl {
namespace {

thread_local std::string tlsLastError;

struct Registry {
  std::mutex mu;
  std::unordered_set<const hetcclComm*> live;
  std::unordered_map<const hetcclComm*, std::string> lastError;
};
Registry& registry() {
  static Registry* r = new Registry;  // outlives static destructors of other units
  return *r;
}

}  // namespace

void recordError(hetcclComm* comm, const char* fn, hetcclResult_t code, const std::string& msg) {
  std::string text = std::string(fn) + ": ";
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  bool live = comm && r.live.count(comm);
  if (live) text += "rank " + std::to_string(comm->rank()) + ": ";
  text += msg;
  tlsLastError = text;
  if (live) {
    r.lastError[comm] = text;
    // A failure inside the data path leaves connections in an unknown state.
    if (code == hetcclRemoteError || code == hetcclSystemError || code == hetcclInternalError)
      comm->setAsyncError(code);
  }
  LOG_WARN(kAll, "%s", text.c_str());
}

void clearError() { tlsLastError.clear(); }

void checkComm(const hetcclComm* comm) {
  if (!comm) throwError(hetcclInvalidArgument, "comm is NULL");
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  if (!r.live.count(comm))
    throwError(hetcclInvalidUsage, "comm is not a live communicator (destroyed, aborted, or never created)");
}

void checkReady(const hetcclComm* comm) {
  if (!comm->ready())
    throwError(hetcclInvalidUsage, "communicator init has not completed (poll hetcclCommGetAsyncError until it "
                                   "returns something other than hetcclInProgress)");
}

void registerComm(hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.live.insert(comm);
}

void unregisterComm(hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.live.erase(comm);
  r.lastError.erase(comm);
}

const char* lastErrorText(const hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = comm ? r.lastError.find(comm) : r.lastError.end();
  if (it != r.lastError.end()) return it->second.c_str();
  return tlsLastError.c_str();
}

CallScope::CallScope(hetcclComm* comm) : comm_(comm) { comm_->activeCalls.fetch_add(1); }
CallScope::~CallScope() { comm_->activeCalls.fetch_sub(1); }

}  // namespace hetccl
