#include "comm/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/settings.h"
#include "core/error.h"
#include "bootstrap/auth.h"
#include "bootstrap/root.h"
#include "observe/flight_signal.h"
#include "comm/link_security.h"
#include "secure/aead.h"
#include "border/border_choice.h"
#include "observe/metrics_server.h"
#include "observe/observed.h"
#include "comm/comm_model.h"
#include "observe/tracer.h"
#include "transport/routed.h"
#include "core/json.h"
#include "core/log.h"
#include "device/kernels_plugin.h"
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
  proxy_.setFailureHook([this](hetcclResult_t code, const std::string& text) { fail(code, text); });
  watcher_.setFailureHook([this](hetcclResult_t code, const std::string& text) { fail(code, text); });
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
    if (settings::kGroupMap.isSet()) {
      const std::string map = settings::kGroupMap.get();
      const uint8_t key[16] = {'g', 'r', 'o', 'u', 'p', '-', 'm', 'a', 'p'};
      me.groupMapHash = sipHash24(key, map.data(), map.size()) | 1;
    }
  } catch (const Error& e) {
    // The others would wait for this rank until their timeout: the
    // rendezvous root tells them now, with this message.
    reportInitFailure(id, rank, nranks, e.what(), opts_.timeoutS);
    throw;
  }

  bootstrap_ = std::make_unique<Bootstrap>(id, rank, nranks, me.serialize(), opts_.timeoutS, &abort_);
  try {
    setUp(me, group);
  } catch (const std::exception& e) {
    // The others fail at their next allgather (at the latest the closing
    // barrier) naming this rank and why, instead of a neighbour's socket.
    bootstrap_->announceFailure(e.what());
    throw;
  }
}

void Comm::setUp(const PeerInfo& me, const std::string& group) {
  const int rank = rank_, nranks = nranks_;
  // Every rank gets here as the bootstrap's exchange of peer records ends,
  // within about one of its ring steps: the clocks read now give the
  // ranks' offsets (sent with the next exchange) for the timeline.
  const double wallNow =
      std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<PeerInfo> peers;
  for (int r = 0; r < nranks; ++r) peers.push_back(PeerInfo::deserialize(bootstrap_->records()[r], r));
  for (int r = 0; r < nranks; ++r)
    if (peers[r].groupMapHash != me.groupMapHash)
      throwError(hetcclInvalidUsage,
                 std::string("HETCCL_GROUP_MAP differs between ranks: rank ") + std::to_string(rank) +
                     (me.groupMapHash ? " has '" + settings::kGroupMap.get() + "'" : " has none") + ", rank " +
                     std::to_string(r) + (peers[r].groupMapHash ? " another" : " none") +
                     " (every rank must see the same map)");
  topo_ = buildTopology(peers);

  // A transport per link class: peers on this host (intra) and on others
  // (inter). auto: intra shm; inter ucx when every rank has UCX and an RDMA
  // device, else tcp (every rank decides alike from the same facts).
  const TransportChoice choice = opts_.transport.empty()
                                     ? parseTransportChoice(settings::kTransport.get(), "HETCCL_TRANSPORT")
                                     : parseTransportChoice(opts_.transport, "hetcclConfig_t.transport");
  intraName_ = choice.intra == "auto" ? "shm" : choice.intra;
  interName_ = choice.inter;
  if (!topo_.singleHost && interName_ == "auto") {
    std::vector<uint8_t> rdma(nranks, 0);
    rdma[rank] = ucxRdmaAvailable() ? 1 : 0;
    bootstrap_->allGather(rdma.data(), 1);
    bool all = std::all_of(rdma.begin(), rdma.end(), [](uint8_t v) { return v != 0; });
    interName_ = all ? "ucx" : "tcp";
  }
  security_ = planLinkSecurity(peers, rank, intraName_, interName_, bootstrap_->id().weakSecret);
  site_ = me.site;
  transportName_ = topo_.singleHost || intraName_ == interName_ ? intraName_ : intraName_ + "+" + interName_;
  if (transportName_ == "shm" && !topo_.singleHost)
    throwError(hetcclInvalidUsage, "transport shm needs every rank on one host; these ranks span several");
  // Every rank must pick the same transport, and cut AllReduce into the
  // same chunks (else their messages differ in size): one allgather for both.
  struct Agree {
    char transport[16];
    uint64_t chunkBytes;
    double wallUs;
    uint8_t hostLevels;
    char encrypt[12];
    uint64_t rekeyRecords;
    char cut[12];
    uint64_t smallBytes;  // HETCCL_SMALL_BYTES as set, or ~0 where unset (the default, or the model's)
  };
  std::vector<Agree> all(nranks, Agree{});
  snprintf(all[rank].transport, sizeof(all[rank].transport), "%s", transportName_.c_str());
  all[rank].chunkBytes = chunkBytes_;
  all[rank].wallUs = wallNow;
  all[rank].hostLevels = settings::kHostLevels.get() ? 1 : 0;
  snprintf(all[rank].encrypt, sizeof(all[rank].encrypt), "%s", security_.mode.c_str());
  all[rank].rekeyRecords = security_.rekeyRecords;
  const std::string cutMode = settings::kBorderCut.get();
  snprintf(all[rank].cut, sizeof(all[rank].cut), "%s", cutMode.c_str());
  all[rank].smallBytes = settings::kSmallBytes.isSet() ? smallBytes_ : ~uint64_t{0};
  bootstrap_->allGather(all.data(), sizeof(Agree));
  const double clockOffsetUs = all[rank].wallUs - all[0].wallUs;
  for (int r = 0; r < nranks; ++r) {
    const Agree& a = all[r];
    if (strncmp(a.transport, transportName_.c_str(), sizeof(a.transport)) != 0)
      throwError(hetcclInvalidUsage, "rank " + std::to_string(r) + " chose transport '" +
                                         std::string(a.transport, strnlen(a.transport, sizeof(a.transport))) +
                                         "' but rank " + std::to_string(rank) + " chose '" + transportName_ +
                                         "' (HETCCL_TRANSPORT must agree)");
    if (a.hostLevels != all[rank].hostLevels)
      throwError(hetcclInvalidUsage, "HETCCL_HOST_LEVELS differs between rank " + std::to_string(r) + " and rank " +
                                         std::to_string(rank) + " (every rank must set the same)");
    if (strncmp(a.encrypt, all[rank].encrypt, sizeof(a.encrypt)) != 0 || a.rekeyRecords != security_.rekeyRecords)
      throwError(hetcclInvalidUsage,
                 "HETCCL_ENCRYPT is " + std::string(a.encrypt, strnlen(a.encrypt, sizeof(a.encrypt))) + " on rank " +
                     std::to_string(r) + " but " + security_.mode + " on rank " + std::to_string(rank) +
                     " (every rank must set the same, and the same HETCCL_ENCRYPT_REKEY_RECORDS)");
    if (strncmp(a.cut, all[rank].cut, sizeof(a.cut)) != 0)
      throwError(hetcclInvalidUsage, "HETCCL_BORDER_CUT is " + std::string(a.cut, strnlen(a.cut, sizeof(a.cut))) +
                                         " on rank " + std::to_string(r) + " but " + cutMode + " on rank " +
                                         std::to_string(rank) + " (every rank must set the same)");
    if (a.smallBytes != all[rank].smallBytes) {
      auto shown = [](uint64_t v) { return v == ~uint64_t{0} ? std::string("unset") : std::to_string(v); };
      throwError(hetcclInvalidUsage, "HETCCL_SMALL_BYTES is " + shown(a.smallBytes) + " on rank " + std::to_string(r) +
                                         " but " + shown(all[rank].smallBytes) + " on rank " + std::to_string(rank) +
                                         " (every rank must set the same, or none)");
    }
    if (a.chunkBytes != chunkBytes_)
      throwError(hetcclInvalidUsage, "HETCCL_CHUNK_BYTES is " + std::to_string(a.chunkBytes) + " on rank " +
                                         std::to_string(r) + " but " + std::to_string(chunkBytes_) + " on rank " +
                                         std::to_string(rank) + " (every rank must set the same)");
  }
  TransportContext tc;
  tc.rank = rank;
  tc.nranks = nranks;
  for (int r = 0; r < nranks; ++r)
    if (r != rank) tc.peers.push_back(r);
  tc.bootstrap = bootstrap_.get();
  tc.abort = &abort_;
  tc.timeoutS = opts_.timeoutS;
  tc.buffBytes = buffBytes_;
  tc.encrypt = security_.encrypt;
  tc.rekeyRecords = security_.rekeyRecords;
  if (settings::kTraceFile.isSet()) {
    tracer_ =
        Tracer::open(settings::kTraceFile.get(), rank, nranks,
                     "group " + group + ", " + device_->kind() + ", pid " + std::to_string(getpid()), isGpuRank());
    if (tracer_) {
      tracer_->setClockOffset(clockOffsetUs);
      Tracer* t = tracer_.get();
      flight_.setListener([t, origin = flight_.originUs()](const FlightRecorder::Record& r) { t->call(r, origin); });
    }
  }
  std::vector<uint8_t> remoteHost(nranks, 0);
  tc.localRanks = 0;
  hostOf_.assign(nranks, 0);
  for (int r = 0; r < nranks; ++r) {
    while (peers[hostOf_[r]].hostHash != peers[r].hostHash) ++hostOf_[r];  // the lowest rank on r's host
    remoteHost[r] = peers[r].hostHash != me.hostHash;
    if (r < rank && !remoteHost[r]) ++hostIndex_;
    tc.localRanks += remoteHost[r] ? 0 : 1;
  }
  relayContext_ = tc;  // the device border's relay across hosts (its own transports)
  std::unique_ptr<Transport> inner;
  if (transportName_ == intraName_) {
    inner = createTransport(transportName_, tc);
  } else {  // every rank makes both (their setup is collective), each over its peers of that class
    TransportContext near = tc, far = tc;
    near.peers.clear();
    far.peers.clear();
    for (int r : tc.peers) (remoteHost[r] ? far : near).peers.push_back(r);
    auto intra = createTransport(intraName_, near);
    inner = std::make_unique<RoutedTransport>(std::move(intra), createTransport(interName_, far), remoteHost);
  }
  Transport* groupTransport = inner.get();  // the host backend's: its group steps are not border steps
  if (observing())
    inner = std::make_unique<ObservedTransport>(std::move(inner), metrics_, tracer_.get(), std::move(remoteHost));
  transport_ = std::move(inner);
  // Bandwidth cut: rates shared or measured now, over the unobserved
  // transport (the probe is not a border step of any call).
  borderCut_ = planBorderCut(cutMode, topo_, rank, *bootstrap_, *groupTransport, settings::kBorderProbeBytes.get());
  if (rank == 0 && topo_.ngroups() > 1) LOG_INFO(kTopo, "%s", borderCut_.describe().c_str());
  // With those rates the cost model picks where AllReduce across groups
  // takes the bandwidth plan (the host backend's own threshold stays).
  const size_t settingSmallBytes = smallBytes_;
  if (!settings::kSmallBytes.isSet()) {
    if (size_t s = modelSmallBytes(topo_, peers, borderCut_)) {
      smallBytes_ = s;
      if (rank == 0) LOG_INFO(kTopo, "cost model: AllReduce across groups takes the bandwidth plan from %zu bytes", s);
    }
  }

  BackendContext bc;
  bc.ranks = topo_.groupOfRank(rank).ranks;
  bc.groupRank = topo_.groupRank[rank];
  bc.bootstrap = bootstrap_.get();
  bc.transport = groupTransport;
  bc.device = device_.get();
  bc.callTag = &callTag_;
  bc.smallBytes = settingSmallBytes;
  bc.abort = &abort_;
  bc.timeoutS = opts_.timeoutS;
  bc.blocking = opts_.blocking;
  bc.vendorConfig = opts_.vendorConfig;
  for (int r : bc.ranks) bc.hostOf.push_back(hostOf_[r]);  // each group rank's host
  {
    auto be = createBackend(opts_.backend.empty() ? defaultBackendFor(device_->kind()) : opts_.backend, bc);
    std::lock_guard<std::mutex> g(backendMu_);
    backend_ = std::move(be);
  }
  if (abort_.load()) throwError(hetcclInvalidUsage, "the communicator was aborted during init");
  // Vendor backends: each group's rank 0 publishes its library's unique id.
  std::vector<uint8_t> ids(static_cast<size_t>(nranks) * kBackendIdBytes, 0);
  if (groupRank() == 0) backend_->makeId(ids.data() + static_cast<size_t>(rank) * kBackendIdBytes);
  bootstrap_->allGather(ids.data(), kBackendIdBytes);
  backend_->connect(ids.data() + static_cast<size_t>(topo_.groupOfRank(rank).ranks[0]) * kBackendIdBytes);
  if (observing()) observedBackend_ = std::make_unique<ObservedBackend>(*backend_, bc, metrics_, tracer_.get());

  if (isGpuRank() && topo_.ngroups() > 1) {
    auto ds = std::make_unique<StagingState>(*device_, settings::kStagingMax.get(), settings::kDeviceScratchMax.get(),
                                             streamPriority_);
    {
      std::lock_guard<std::mutex> g(backendMu_);  // abort() reads it from any thread
      stagingState_ = std::move(ds);
    }
  }
  setUpDeviceBorder();

  LOG_INFO(kInit, "rank %d of %d: group %s (%d of %zu), %d groups, transport %s, backend %s", rank, nranks,
           group.c_str(), groupRank(), topo_.groupOfRank(rank).ranks.size(), topo_.ngroups(), transportName_.c_str(),
           backend_->name());
  if (rank == 0) LOG_INFO(kTopo, "topology:\n%s", describeTopology(topo_).c_str());
  // All or nothing: a rank returns from init only once every rank got here,
  // so a peer that failed or stalled in its setup fails everyone's init.
  bootstrap_->barrier();
  ready_.store(true);
  flight_.setContext(
      "\"host\": " + jsonQuoted(localHostName()) + ", \"group\": " + jsonQuoted(topo_.groupOfRank(rank_).name) +
      ", \"transport\": " + jsonQuoted(transportName_) + ", \"border_path\": " + jsonQuoted(borderPath()));
  metricsAttach(this);  // its counters on the metrics endpoint, if any
}

void Comm::setUpDeviceBorder() {
  DeviceBorderFacts f;
  f.want = settings::kGpuBorder.get();
  for (const Group& g : topo_.groups) {
    f.groupKinds.push_back(g.deviceKind);
  }
  std::string whyNot = deviceBorderWhyNot(f);
  if (whyNot == kNotEveryRankSays) {
    if (isGpuRank() && topo_.ngroups() > 1)
      LOG_INFO(kInit, "rank %d: border data path staged: %s memory through pinned staging (a group of host ranks)",
               rank_, device_->kind());
    return;
  }
  if (!whyNot.empty()) {
    if (f.want == "1") throwError(hetcclInvalidUsage, "HETCCL_GPU_BORDER=1, but " + whyNot);
    LOG_INFO(kInit, "rank %d: border data path staged, no device border: %s", rank_, whyNot.c_str());
    return;
  }
  // The same facts on every rank so far; what each rank can load is its own.
  std::string mine;
  try {
    kernels_ = loadKernels(device_->kind());
    if (kernels_) preloadKernels(*kernels_);
    if (!kernels_) mine = "no device kernels plugin (" + kernelsLibName(device_->kind()) + ") was found";
  } catch (const Error& e) {
    mine = std::string("the device kernels plugin did not load: ") + e.what();
  }
  std::vector<uint8_t> ok(nranks_, 0);
  ok[rank_] = mine.empty() ? 1 : 0;
  bootstrap_->allGather(ok.data(), 1);
  for (int r = 0; r < nranks_; ++r)
    if (!ok[r] && whyNot.empty())
      whyNot = r == rank_ ? "on rank " + std::to_string(r) + ", " + mine
                          : "rank " + std::to_string(r) + " cannot run device kernels (its log says why)";
  if (!whyNot.empty()) {
    kernels_ = nullptr;
    if (f.want == "1") throwError(hetcclInvalidUsage, "HETCCL_GPU_BORDER=1, but " + whyNot);
    LOG_INFO(kInit, "rank %d: border data path staged, no device border: %s", rank_, whyNot.c_str());
    return;
  }
  DeviceBorder::Setup s;
  s.bootstrap = bootstrap_.get();
  s.device = device_.get();
  s.rank = rank_;
  s.shares = static_cast<int>(topo_.groups[0].ranks.size());
  for (const Group& g : topo_.groups) s.shares = std::min(s.shares, static_cast<int>(g.ranks.size()));
  if (groupRank() < s.shares) {
    for (const Group& g : topo_.groups) s.peerRanks.push_back(g.ranks[groupRank()]);
    s.me = myGroup();
  } else {
    s.peerRanks = {rank_};
    s.me = 0;
  }
  s.groupOf = topo_.groupOf;
  s.groupRank = topo_.groupRank;
  s.partBytes = settings::kGpuBorderChunk.get();
  s.minBytes = settings::kGpuBorderMin.get();
  s.minIsSet = settings::kGpuBorderMin.isSet();
  s.roundKernel = settings::kGpuBorderKernel.get();
  s.priority = streamPriority_;
  s.releaseToo = {stagingState_->completion().flag()};
  s.canRound = kernels_->borderRound != nullptr;
  s.ranksOnHost = relayContext_.localRanks;
  if (!topo_.singleHost) {
    s.hostOf = hostOf_;
    s.relayTransport = interName_;
    s.relayContext = &relayContext_;
    s.metrics = &metrics_;
    s.relayFailed = [this](hetcclResult_t code, const std::string& why) { fail(code, why); };
  }
  auto b = DeviceBorder::create(s);
  if (!b) {
    kernels_ = nullptr;
    if (f.want == "1")
      throwError(hetcclInvalidUsage,
                 "HETCCL_GPU_BORDER=1, but /dev/shm has too little room for "
                 "the device border's segments (lower HETCCL_GPU_BORDER_CHUNK)");
    return;
  }
  LOG_INFO(kInit, "rank %d: border data path device: the device border (calls it does not take stage)", rank_);
  std::lock_guard<std::mutex> g(backendMu_);  // abort() reads it from any thread
  border_ = std::move(b);
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
