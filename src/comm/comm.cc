#include "comm/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/settings.h"
#include "core/error.h"
#include "bootstrap/auth.h"
#include "bootstrap/root.h"
#include "observe/flight_signal.h"
#include "secure/aead.h"
#include "core/log.h"
#include "observe/tracer.h"
#include "topology/peer.h"

namespace hetccl {

CommOptions readOptions(const hetcclConfig_t* cfg) {
  CommOptions o;
  o.deviceKind = settings::kDevice.get();
  o.backend = settings::kBackend.get();
  o.timeoutS = static_cast<double>(settings::kTimeoutS.get());
  if (!cfg) return o;
  if (cfg->magic != HETCCL_CONFIG_MAGIC)
    throwError(hetcclInvalidArgument, "config: bad magic (initialise it with HETCCL_CONFIG_INITIALIZER)");
  // Fields are appended over versions: read only those inside the caller's size.
  constexpr size_t v1Size = offsetof(hetcclConfig_t, transport) + sizeof(const char*);
  if (cfg->size < offsetof(hetcclConfig_t, blocking) + sizeof(int))
    throwError(hetcclInvalidArgument, "config: size " + std::to_string(cfg->size) + " is smaller than any version");
  if (cfg->blocking != HETCCL_CONFIG_UNDEF_INT) o.blocking = cfg->blocking != 0;
  if (cfg->size >= v1Size) {
    if (cfg->timeoutSeconds != HETCCL_CONFIG_UNDEF_INT) {
      if (cfg->timeoutSeconds <= 0 || cfg->timeoutSeconds > 31536000)
        throwError(hetcclInvalidArgument,
                   "config: timeoutSeconds " + std::to_string(cfg->timeoutSeconds) + " is not from 1 to 31536000");
      o.timeoutS = cfg->timeoutSeconds;
    }
    if (cfg->groupName) o.groupName = cfg->groupName;
    if (cfg->transport) o.transport = cfg->transport;
  }
  constexpr size_t v2Size = offsetof(hetcclConfig_t, backend) + sizeof(const char*);
  if (cfg->size >= v2Size) {
    if (cfg->device) o.deviceKind = cfg->device;
    if (cfg->backend) o.backend = cfg->backend;
  }
  constexpr size_t v3Size = offsetof(hetcclConfig_t, site) + sizeof(const char*);
  if (cfg->size >= v3Size && cfg->site) o.site = cfg->site;
  return o;
}

namespace {

// Once a process: a retired HETCCL_* variable that is still set (the job
// means something hetccl no longer does) is named in a warning with why.
void warnRetiredSettings() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string& w : retiredSettingsInEnvironment()) LOG_WARN(kInit, "%s", w.c_str());
  });
}

}  // namespace

Comm::Comm(int nranks, int rank, const CommOptions& opts)
    : opts_(opts),
      rank_(rank),
      nranks_(nranks),
      metrics_(nranks),
      metricsOn_(settings::kMetrics.get()),
      flight_(static_cast<size_t>(settings::kFlightRecorder.get()), settings::kFlightDir.get(),
              metricsOn_ ? &metrics_ : nullptr) {
  logSetRank(rank);
  if (opts_.timeoutS <= 0) throwError(hetcclInvalidArgument, "the timeout must be positive");
  buffBytes_ = settings::kBuffSize.get();
  smallBytes_ = settings::kSmallBytes.get();
  chunkBytes_ = settings::kChunkBytes.get();
  streamPriority_ = settings::kGpuStreamPriority.get() == "default" ? DeviceRuntime::Priority::kDefault
                                                                    : DeviceRuntime::Priority::kHighest;
  checkMismatch_ = settings::kCheckMismatch.get();
  planFolds_ = settings::kPlanFolds.get();
  warnRetiredSettings();
  device_ = createDeviceRuntime(opts_.deviceKind);
  // A proxy job that fails (a GPU rank's border step, a non-blocking call)
  // fails the communicator and tells the peers, as a failed call does.
  proxy_.setFailureHook([this](hetcclResult_t code, const std::string& text) { fail(code, withDeadHostRank(text)); });
  watcher_.setFailureHook([this](hetcclResult_t code, const std::string& text) { fail(code, withDeadHostRank(text)); });
  if (flight_.writes()) watchFlightSignal(this, [this](const std::string& why) { dumpFlight(why); });
}

void Comm::init(const IdContents& id) {
  const int rank = rank_, nranks = nranks_;
  {
    char hex[20];
    snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id.jobId));
    std::lock_guard<std::mutex> g(failMu_);  // abort() may dump from another thread
    flightId_ = hex;
  }
  PeerInfo me;
  std::string group;
  try {
    device_->makeCurrent();  // GPU ranks: init may run on the proxy thread
    me.rank = rank;
    me.pid = getpid();
    me.hostHash = localHostHash();
    snprintf(me.hostname, sizeof(me.hostname), "%s", localHostName().c_str());
    snprintf(me.deviceKind, sizeof(me.deviceKind), "%s", device_->kind());
    group = resolveGroupName(rank, nranks, device_->kind(), opts_.groupName.c_str());
    snprintf(me.group, sizeof(me.group), "%s", group.c_str());
    const std::string site = opts_.site ? *opts_.site : resolveSiteName(rank, nranks);
    if (site.size() >= sizeof(me.site))
      throwError(hetcclInvalidArgument, "site name '" + site + "' is longer than 31 characters");
    snprintf(me.site, sizeof(me.site), "%s", site.c_str());
    // Sealed bootstrap connections need libcrypto before the first of them.
    if (bootstrapSealWanted()) secure::requireCrypto();
    // Only a group read from the map is compared with the others' maps: a
    // group given by name (the config, HETCCL_GROUP, a parent communicator's
    // for split, shrink and grow) does not read it.
    if (!opts_.groupName.empty() || settings::kGroup.isSet()) {
      me.groupMapHash = kGroupMapNotRead;
    } else if (settings::kGroupMap.isSet()) {
      const std::string map = settings::kGroupMap.get();
      const uint8_t key[16] = {'g', 'r', 'o', 'u', 'p', '-', 'm', 'a', 'p'};
      me.groupMapHash = sipHash24(key, map.data(), map.size()) | 1;
    } else {
      me.groupMapHash = kGroupMapUnset;
    }
  } catch (const Error& e) {
    // The others would wait for this rank until their timeout: the
    // rendezvous root tells them now, with this message.
    reportInitFailure(id, rank, nranks, e.what(), opts_.timeoutS);
    throw;
  }

  bootstrap_ =
      std::make_unique<Bootstrap>(id, rank, nranks, me.serialize(), opts_.timeoutS, &abort_, opts_.joinTimeoutS);
  try {
    setUp(me, group);
  } catch (const std::exception& e) {
    // The others fail at their next allgather (at the latest the closing
    // barrier) naming this rank and why, instead of a neighbour's socket.
    bootstrap_->announceFailure(e.what());
    throw;
  }
}

std::string Comm::fail(hetcclResult_t code, const std::string& text) {
  bool first = false;
  std::string cause;
  {
    std::lock_guard<std::mutex> g(failMu_);
    if (failText_.empty()) failText_ = text, first = true;
    cause = failText_;
  }
  if (first) dumpFlight("failed: " + text);
  setAsyncError(code == hetcclSuccess || code == hetcclInProgress ? hetcclInternalError : code);
  if (transport_) transport_->poison(text);
  // Halts the relay too: the peers on other hosts learn of it at once. Not
  // under an abort (a watch that the abort ended fails too): the abort
  // releases what its peers wait on by itself, and its peers' idle
  // communicators must not read it as a failure of the job.
  if (border_ && !abort_.load()) border_->markFailed(text);
  return cause;
}

void Comm::watch(std::function<void()> job, std::function<void()> finally) {
  if (proxy_.onThisThread()) return watcher_.submit(std::move(job), std::move(finally));
  struct Handed {
    std::function<void()> job, finally;
    bool handed = false;
  };
  auto h = std::make_shared<Handed>(Handed{std::move(job), std::move(finally)});
  proxy_.submit(
      [this, h] {
        h->handed = true;
        watcher_.submit(std::move(h->job), std::move(h->finally));
      },
      [h] {
        if (!h->handed && h->finally) h->finally();
      });
}

std::string Comm::idText() const {
  std::lock_guard<std::mutex> g(failMu_);
  return flightId_;
}

void Comm::dumpFlight(const std::string& reason) const { flight_.dump(rank_, nranks_, idText(), reason); }

std::string Comm::failureText() const {
  std::lock_guard<std::mutex> g(failMu_);
  return failText_.empty() ? "see the log" : failText_;
}

void Comm::abort() {
  abort_.store(true);
  {
    std::unique_lock<std::mutex> g(failMu_);
    const std::string failed = failText_;
    g.unlock();
    dumpFlight(failed.empty() ? "aborted (hetcclCommAbort)" : "failed, then aborted: " + failed);
  }
  releaseThenAbortLibrary();
}

void Comm::releaseThenAbortLibrary() {
  std::lock_guard<std::mutex> g(backendMu_);
  // First the caller's streams that wait for this communicator's border
  // steps, then the vendor library: its abort synchronises the device,
  // which would wait for those streams for ever (torch's watchdog aborts a
  // hung communicator while the main thread goes on enqueueing calls).
  if (stagingState_) stagingState_->releaseAll();
  if (border_) border_->releaseAll();
  if (backend_) backend_->abort();
}

Comm::~Comm() {
  metricsDetach(this);        // off the endpoint before any member goes
  unwatchFlightSignal(this);  // no SIGUSR1 dump of it from now on
  // Jobs still queued on the proxy end at once: the abort flag is set by
  // hetcclCommAbort, and hetcclCommDestroy drains first.
  abort_.store(true);
  // Replays of captured calls hand nothing more to the proxy.
  if (stagingState_) stagingState_->captured().close();
  proxy_.stop();  // before the backend and device state it uses go
  watcher_.stop();
  // The relays' threads call back into this communicator when they fail:
  // they end while every member is still here.
  if (border_) border_->stopRelays();
}

ReduceOp Comm::resolveOp(hetcclRedOp_t op, DataType dt) const {
  ReduceOp r;
  r.userOp = op;
  if (op >= hetcclSum && op <= hetcclMin) {
    r.kind = static_cast<RedKind>(op);
    return r;
  }
  if (op == hetcclAvg) {
    if (dataTypeIsFloat(dt)) {
      r.preMul = true;
      r.scalar = 1.0 / nranks_;
    } else {
      r.postDiv = true;
      r.divisor = nranks_;
    }
    return r;
  }
  size_t idx = static_cast<size_t>(op) - hetcclNumOps;
  if (op < hetcclNumOps || idx >= premul_.size() || !premul_[idx].live)
    throwError(hetcclInvalidArgument, "op " + std::to_string(static_cast<int>(op)) +
                                          " is neither built in (sum, prod, max, min, avg) nor a live "
                                          "PreMulSum op of this communicator");
  if (premul_[idx].dt != dt)
    throwError(hetcclInvalidArgument, std::string("PreMulSum op was created for ") + dataTypeName(premul_[idx].dt) +
                                          ", used with " + dataTypeName(dt));
  r.preMul = true;
  r.scalar = premul_[idx].scalar;
  r.scalarAt = premul_[idx].at;
  return r;
}

hetcclRedOp_t Comm::createPreMulSum(double scalar, DataType dt, const void* at) {
  for (size_t i = 0; i < premul_.size(); ++i) {
    if (!premul_[i].live) {
      premul_[i] = PreMul{true, scalar, dt, at};
      return static_cast<hetcclRedOp_t>(hetcclNumOps + i);
    }
  }
  premul_.push_back(PreMul{true, scalar, dt, at});
  return static_cast<hetcclRedOp_t>(hetcclNumOps + premul_.size() - 1);
}

void Comm::destroyOp(hetcclRedOp_t op) {
  size_t idx = static_cast<size_t>(op) - hetcclNumOps;
  if (op < hetcclNumOps || idx >= premul_.size() || !premul_[idx].live)
    throwError(hetcclInvalidArgument, "op " + std::to_string(static_cast<int>(op)) + " is not a live PreMulSum op");
  premul_[idx].live = false;
}

uint8_t* Comm::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

}  // namespace hetccl
