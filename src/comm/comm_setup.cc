// A communicator's init after the bootstrap ring is up (Comm::setUp), step
// by step: the peers and the topology, the transports and which links are
// encrypted, what every rank must agree on, the timeline, the transports
// themselves, the bandwidth cut and the cost model's choice, the group's
// vendor backend, and for GPU ranks the staging state and the device
// border. Each step that every rank must take alike decides from facts
// every rank has (one allgather where a rank's own facts differ).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "border/border_choice.h"
#include "comm/auto_transport.h"
#include "comm/comm.h"
#include "comm/comm_model.h"
#include "comm/link_security.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/settings.h"
#include "device/kernels_plugin.h"
#include "observe/observed.h"
#include "observe/tracer.h"
#include "topology/peer.h"
#include "transport/routed.h"

namespace hetccl {

void Comm::setUp(const PeerInfo& me, const std::string& group) {
  // Every rank gets here as the bootstrap's exchange of peer records ends,
  // within about one of its ring steps: the clocks read now give the
  // ranks' offsets (sent with the next exchange) for the timeline.
  const double wallNow =
      std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::vector<PeerInfo> peers = readPeers(me);
  chooseTransports(peers, me);
  std::vector<ProcessIdentity> processes;
  const double clockOffsetUs = agreeAcrossRanks(wallNow, &processes);
  openTracer(group, clockOffsetUs);
  Transport& groupTransport = makeTransports(peers, me);
  const size_t settingSmallBytes = smallBytes_;
  planCuts(peers, groupTransport);
  makeBackend(groupTransport, settingSmallBytes);
  if (isGpuRank() && topo_.ngroups() > 1) {
    auto ds = std::make_unique<StagingState>(*device_, settings::kStagingMax.get(), settings::kDeviceScratchMax.get(),
                                             streamPriority_);
    {
      std::lock_guard<std::mutex> g(backendMu_);  // abort() reads it from any thread
      stagingState_ = std::move(ds);
    }
    watchHostRanks(peers, processes);
  }
  setUpDeviceBorder();

  LOG_INFO(kInit, "rank %d of %d: group %s (%d of %zu), %d groups, transport %s, backend %s", rank_, nranks_,
           group.c_str(), groupRank(), topo_.groupOfRank(rank_).ranks.size(), topo_.ngroups(), transportName_.c_str(),
           backend_->name());
  if (rank_ == 0) LOG_INFO(kTopo, "topology:\n%s", describeTopology(topo_).c_str());
  // All or nothing: a rank returns from init only once every rank got here,
  // so a peer that failed or stalled in its setup fails everyone's init.
  bootstrap_->barrier();
  ready_.store(true);
  flight_.setContext(
      "\"host\": " + jsonQuoted(localHostName()) + ", \"group\": " + jsonQuoted(topo_.groupOfRank(rank_).name) +
      ", \"transport\": " + jsonQuoted(transportName_) + ", \"border_path\": " + jsonQuoted(borderPath()));
  metricsAttach(this);  // its counters on the metrics endpoint, if any
}

std::vector<PeerInfo> Comm::readPeers(const PeerInfo& me) {
  std::vector<PeerInfo> peers;
  for (int r = 0; r < nranks_; ++r) peers.push_back(PeerInfo::deserialize(bootstrap_->records()[r], r));
  for (int r = 0; r < nranks_; ++r)
    if (peers[r].groupMapHash != me.groupMapHash && peers[r].groupMapHash != kGroupMapNotRead &&
        me.groupMapHash != kGroupMapNotRead)
      throwError(hetcclInvalidUsage,
                 std::string("HETCCL_GROUP_MAP differs between ranks: rank ") + std::to_string(rank_) +
                     (me.groupMapHash != kGroupMapUnset ? " has '" + settings::kGroupMap.get() + "'" : " has none") +
                     ", rank " + std::to_string(r) + (peers[r].groupMapHash != kGroupMapUnset ? " another" : " none") +
                     " (every rank must see the same map)");
  topo_ = buildTopology(peers);
  return peers;
}

void Comm::chooseTransports(const std::vector<PeerInfo>& peers, const PeerInfo& me) {
  // A transport per link class: peers on this host (intra) and on others
  // (inter). auto: intra shm; inter the first of HETCCL_AUTO_INTER that fits
  // every rank (comm/auto_transport.h; every rank decides alike from the same facts).
  const TransportChoice choice = opts_.transport.empty()
                                     ? parseTransportChoice(settings::kTransport.get(), "HETCCL_TRANSPORT")
                                     : parseTransportChoice(opts_.transport, "hetcclConfig_t.transport");
  intraName_ = choice.intra == "auto" ? "shm" : choice.intra;
  interName_ = choice.inter;
  if (!topo_.singleHost && interName_ == "auto")
    interName_ = chooseInterTransport(*bootstrap_, rank_, nranks_, parseAutoInter(settings::kAutoInter.get())).name;
  security_ = planLinkSecurity(peers, rank_, intraName_, interName_, bootstrap_->id().weakSecret);
  site_ = me.site;
  transportName_ = topo_.singleHost || intraName_ == interName_ ? intraName_ : intraName_ + "+" + interName_;
  if (transportName_ == "shm" && !topo_.singleHost)
    throwError(hetcclInvalidUsage, "transport shm needs every rank on one host; these ranks span several");
}

double Comm::agreeAcrossRanks(double wallNowUs, std::vector<ProcessIdentity>* processes) {
  // Every rank must pick the same transport, and cut AllReduce into the
  // same chunks (else their messages differ in size): one allgather for all
  // such settings, and the wall clocks for the timeline.
  struct Agree {
    char transport[16];
    uint64_t chunkBytes;
    double wallUs;
    uint8_t hostLevels;
    char encrypt[12];
    uint64_t rekeyRecords;
    char cut[12];
    uint64_t smallBytes;      // HETCCL_SMALL_BYTES as set, or ~0 where unset (the default, or the model's)
    ProcessIdentity process;  // not agreed: what watchHostRanks knows this rank's process by
  };
  const int rank = rank_;
  std::vector<Agree> all(nranks_, Agree{});
  snprintf(all[rank].transport, sizeof(all[rank].transport), "%s", transportName_.c_str());
  all[rank].chunkBytes = chunkBytes_;
  all[rank].wallUs = wallNowUs;
  all[rank].hostLevels = settings::kHostLevels.get() ? 1 : 0;
  snprintf(all[rank].encrypt, sizeof(all[rank].encrypt), "%s", security_.mode.c_str());
  all[rank].rekeyRecords = security_.rekeyRecords;
  const std::string cutMode = settings::kBorderCut.get();
  snprintf(all[rank].cut, sizeof(all[rank].cut), "%s", cutMode.c_str());
  all[rank].smallBytes = settings::kSmallBytes.isSet() ? smallBytes_ : ~uint64_t{0};
  all[rank].process = ProcessIdentity::self();
  bootstrap_->allGather(all.data(), sizeof(Agree));
  for (const Agree& a : all) processes->push_back(a.process);
  auto text = [](const char* s, size_t n) { return std::string(s, strnlen(s, n)); };
  for (int r = 0; r < nranks_; ++r) {
    const Agree& a = all[r];
    if (strncmp(a.transport, transportName_.c_str(), sizeof(a.transport)) != 0)
      throwError(hetcclInvalidUsage, "rank " + std::to_string(r) + " chose transport '" +
                                         text(a.transport, sizeof(a.transport)) + "' but rank " + std::to_string(rank) +
                                         " chose '" + transportName_ + "' (HETCCL_TRANSPORT must agree)");
    if (a.hostLevels != all[rank].hostLevels)
      throwError(hetcclInvalidUsage, "HETCCL_HOST_LEVELS differs between rank " + std::to_string(r) + " and rank " +
                                         std::to_string(rank) + " (every rank must set the same)");
    if (strncmp(a.encrypt, all[rank].encrypt, sizeof(a.encrypt)) != 0 || a.rekeyRecords != security_.rekeyRecords)
      throwError(hetcclInvalidUsage, "HETCCL_ENCRYPT is " + text(a.encrypt, sizeof(a.encrypt)) + " on rank " +
                                         std::to_string(r) + " but " + security_.mode + " on rank " +
                                         std::to_string(rank) +
                                         " (every rank must set the same, and the same HETCCL_ENCRYPT_REKEY_RECORDS)");
    if (strncmp(a.cut, all[rank].cut, sizeof(a.cut)) != 0)
      throwError(hetcclInvalidUsage, "HETCCL_BORDER_CUT is " + text(a.cut, sizeof(a.cut)) + " on rank " +
                                         std::to_string(r) + " but " + cutMode + " on rank " + std::to_string(rank) +
                                         " (every rank must set the same)");
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
  return all[rank].wallUs - all[0].wallUs;
}

void Comm::openTracer(const std::string& group, double clockOffsetUs) {
  if (!settings::kTraceFile.isSet()) return;
  tracer_ = Tracer::open(settings::kTraceFile.get(), rank_, nranks_,
                         "group " + group + ", " + device_->kind() + ", pid " + std::to_string(getpid()), isGpuRank());
  if (!tracer_) return;
  tracer_->setClockOffset(clockOffsetUs);
  Tracer* t = tracer_.get();
  flight_.setListener([t, origin = flight_.originUs()](const FlightRecorder::Record& r) { t->call(r, origin); });
}

Transport& Comm::makeTransports(const std::vector<PeerInfo>& peers, const PeerInfo& me) {
  TransportContext tc;
  tc.rank = rank_;
  tc.nranks = nranks_;
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_) tc.peers.push_back(r);
  tc.bootstrap = bootstrap_.get();
  tc.abort = &abort_;
  tc.timeoutS = opts_.timeoutS;
  tc.buffBytes = buffBytes_;
  tc.encrypt = security_.encrypt;
  tc.rekeyRecords = security_.rekeyRecords;
  std::vector<uint8_t> remoteHost(nranks_, 0);
  tc.localRanks = 0;
  hostOf_.assign(nranks_, 0);
  for (int r = 0; r < nranks_; ++r) {
    while (peers[hostOf_[r]].hostHash != peers[r].hostHash) ++hostOf_[r];  // the lowest rank on r's host
    remoteHost[r] = peers[r].hostHash != me.hostHash;
    if (r < rank_ && !remoteHost[r]) ++hostIndex_;
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
  Transport& groupTransport = *inner;  // the host backend's: its group steps are not border steps
  if (observing())
    inner = std::make_unique<ObservedTransport>(std::move(inner), metrics_, tracer_.get(), std::move(remoteHost));
  transport_ = std::move(inner);
  return groupTransport;
}

void Comm::planCuts(const std::vector<PeerInfo>& peers, Transport& groupTransport) {
  // Bandwidth cut: rates shared or measured now, over the unobserved
  // transport (the probe is not a border step of any call).
  borderCut_ = planBorderCut(settings::kBorderCut.get(), topo_, rank_, *bootstrap_, groupTransport,
                             settings::kBorderProbeBytes.get());
  if (rank_ == 0 && topo_.ngroups() > 1) LOG_INFO(kTopo, "%s", borderCut_.describe().c_str());
  // With those rates the cost model picks where AllReduce across groups
  // takes the bandwidth plan (the host backend's own threshold stays).
  if (settings::kSmallBytes.isSet()) return;
  if (size_t s = modelSmallBytes(topo_, peers, borderCut_)) {
    smallBytes_ = s;
    if (rank_ == 0) LOG_INFO(kTopo, "cost model: AllReduce across groups takes the bandwidth plan from %zu bytes", s);
  }
}

void Comm::makeBackend(Transport& groupTransport, size_t settingSmallBytes) {
  BackendContext bc;
  bc.ranks = topo_.groupOfRank(rank_).ranks;
  bc.groupRank = topo_.groupRank[rank_];
  bc.bootstrap = bootstrap_.get();
  bc.transport = &groupTransport;
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
  std::vector<uint8_t> ids(static_cast<size_t>(nranks_) * kBackendIdBytes, 0);
  if (groupRank() == 0) backend_->makeId(ids.data() + static_cast<size_t>(rank_) * kBackendIdBytes);
  bootstrap_->allGather(ids.data(), kBackendIdBytes);
  backend_->connect(ids.data() + static_cast<size_t>(topo_.groupOfRank(rank_).ranks[0]) * kBackendIdBytes);
  if (observing()) observedBackend_ = std::make_unique<ObservedBackend>(*backend_, bc, metrics_, tracer_.get());
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

}  // namespace hetccl
