#include "api/guard.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/log.h"

namespace hetccl {
namespace {

thread_local std::string tlsLastError;

struct Registry {
  std::mutex mu;
  std::unordered_set<const hetcclComm*> live;
  // The communicator last found live, checked before the set (a job calls
  // on one communicator after another); cleared when it is retired.
  const hetcclComm* recent = nullptr;
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

namespace {
// Under the registry's lock.
void requireLive(const Registry& r, const hetcclComm* comm) {
  if (!comm) throwError(hetcclInvalidArgument, "comm is NULL");
  if (!r.live.count(comm))
    throwError(hetcclInvalidUsage, "comm is not a live communicator (destroyed, aborted, or never created)");
}
}  // namespace

CommRef::CommRef(hetcclComm* comm) : comm_(comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  if (!comm || comm != r.recent) {
    requireLive(r, comm);
    r.recent = comm;
  }
  comm->activeCalls.fetch_add(1);
}

CommRef::~CommRef() { comm_->activeCalls.fetch_sub(1); }

ExclusiveUse::ExclusiveUse(hetcclComm& comm) : comm_(comm) {
  if (!comm.inCall.exchange(true)) return;
  std::string msg =
      "communicator used by two threads at once: a call on another thread was still running on it "
      "(calls on one communicator must come one at a time; use one communicator per thread)";
  comm.fail(hetcclInvalidUsage, msg);
  throwError(hetcclInvalidUsage, msg);
}

ExclusiveUse::~ExclusiveUse() { comm_.inCall.store(false); }

bool commIsLive(const hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  return comm && r.live.count(comm);
}

void retireComm(hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  requireLive(r, comm);
  r.live.erase(comm);
  r.lastError.erase(comm);
  if (r.recent == comm) r.recent = nullptr;
}

void waitUntilIdle(hetcclComm* comm) {
  while (comm->activeCalls.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

void retireIdleComm(hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  requireLive(r, comm);
  if (comm->activeCalls.load() != 0)
    throwError(hetcclInvalidUsage,
               "comm is in use by a call on another thread (hetcclCommAbort ends it from any "
               "thread; Destroy needs it idle)");
  r.live.erase(comm);
  r.lastError.erase(comm);
  if (r.recent == comm) r.recent = nullptr;
}

void checkReady(const hetcclComm* comm) {
  if (!comm->ready())
    throwError(hetcclInvalidUsage,
               "communicator init has not completed (poll hetcclCommGetAsyncError until it "
               "returns something other than hetcclInProgress)");
}

void registerComm(hetcclComm* comm) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  r.live.insert(comm);
}

const char* lastErrorText(const hetcclComm* comm) {
  thread_local std::string copy;
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = comm ? r.lastError.find(comm) : r.lastError.end();
  copy = it != r.lastError.end() ? it->second : tlsLastError;
  return copy.c_str();
}

}  // namespace hetccl
