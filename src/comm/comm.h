// The communicator: one per rank and hetcclCommInit*. It owns the bootstrap,
// the topology, this rank's device runtime and group backend, and the border
// transport, plus the state that the API layer reports (errors, sequence
// numbers, PreMulSum ops).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "comm/border_cut.h"
#include "core/datatype.h"
#include "core/process_watch.h"
#include "observe/call_metrics.h"
#include "border/device_border.h"
#include "observe/flight_recorder.h"
#include "observe/metrics_server.h"
#include "comm/link_security.h"
#include "comm/proxy.h"
#include "device/device.h"
#include "device/staging.h"
#include "kernels/kernels_api.h"
#include "topology/groups.h"
#include "transport/transport.h"

namespace hetccl {

class LocalOps;
class Tracer;

struct CommOptions {
  bool blocking = true;
  double timeoutS = 300;
  std::string groupName;  // empty: resolve from the environment
  std::string transport;  // empty: HETCCL_TRANSPORT
  std::string deviceKind = "host";
  std::string backend;  // empty: the device kind's default (HETCCL_BACKEND)
  // This rank's site; unset: HETCCL_SITE, else HETCCL_SITE_MAP (by this
  // communicator's ranks). Derived communicators keep their parent's.
  std::optional<std::string> site;
  // The caller's ncclConfig_t, byte for byte (the drop-in's callers): the
  // vendor library of the group gets it as its own init config.
  std::vector<uint8_t> vendorConfig;
  // How long the rendezvous waits for every rank (0: timeoutS). A shrink's
  // is longer: its survivors learn of a failure at different times.
  double joinTimeoutS = 0;
};

// Reads hetcclConfig_t by its size and version; null is all defaults.
// Throws InvalidArgument on a bad magic or an unsupported size.
CommOptions readOptions(const hetcclConfig_t* config);

// Set by a GPU rank's staged path around an AllReduce that runs in chunks:
// before(k) waits until chunk k is in pinned memory, after(k) lets the
// caller's stream copy it out.
struct ChunkHooks {
  std::function<void(size_t chunk)> before, after;
};

class Comm : public MetricsSource {
 public:
  // Cheap: validates the settings and makes the device runtime. init() does
  // the rest (collective over all ranks of id); a non-blocking communicator
  // runs it on its proxy.
  Comm(int nranks, int rank, const CommOptions& opts);
  ~Comm();
  void init(const IdContents& id);
  bool ready() const { return ready_.load(); }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Topology& topo() const { return topo_; }
  int myGroup() const { return topo_.groupOf[rank_]; }
  int groupRank() const { return topo_.groupRank[rank_]; }
  const CommOptions& options() const { return opts_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  Transport& transport() { return *transport_; }
  // The group's library (plans take theirs from their PlanContext).
  Backend& groupBackend() { return *backend_; }
  // The same, as the plans of this rank's own calls use it: each step
  // counted in the metrics and, where HETCCL_TRACE_FILE is set, recorded on
  // the timeline (observe/observed.h).
  Backend& planBackend() { return observedBackend_ ? *observedBackend_ : *backend_; }
  // Counters of this communicator's calls and steps (observe/call_metrics.h).
  CallMetrics& metrics() { return metrics_; }
  const CallMetrics& metrics() const { return metrics_; }
  // Steps are counted (HETCCL_METRICS) or traced (HETCCL_TRACE_FILE).
  bool observing() const { return metricsOn_ || tracer_ != nullptr; }
  // The job id in hex ("uninitialised" before init has it).
  std::string idText() const;
  // Ranks before this one on its host (its index among them), from init on.
  int hostIndex() const { return hostIndex_; }
  // The timeline (observe/tracer.h), or null.
  Tracer* tracer() { return tracer_.get(); }
  // GPU ranks of multi-group communicators: streams, flag, staging.
  StagingState* stagingState() { return stagingState_.get(); }
  // A GPU rank: its calls take effect in the order of their streams.
  bool isGpuRank() const { return !device_->synchronous(); }
  DeviceRuntime& device() { return *device_; }
  // The transport of every link ("shm", "tcp", "ucx"), or "<intra>+<inter>"
  // where peers on this host and on others use different ones.
  const std::string& transportName() const { return transportName_; }
  const std::string& intraTransport() const { return intraName_; }
  // This rank's site and which of its links are encrypted (comm/link_security.h).
  const std::string& site() const { return site_; }
  const std::string& encryptMode() const { return security_.mode; }
  int encryptedPeers() const { return security_.encryptedPeers; }
  const std::string& interTransport() const { return interName_; }
  // How this rank's border data moves: "none" (one group), "host" (host
  // memory, handed to the transport as it is), "staged" (device memory,
  // copied through pinned staging on the caller's stream) or "device" (GPU
  // ranks with the device border, border/device_border.h; the calls it does
  // not take stage).
  const char* borderPath() const {
    return topo_.ngroups() == 1 ? "none" : border_ ? "device" : isGpuRank() ? "staged" : "host";
  }
  // The last calls of this communicator (observe/flight_recorder.h) ...
  FlightRecorder& flight() { return flight_; }
  // ... written to HETCCL_FLIGHT_DIR, naming why (failure, abort).
  void dumpFlight(const std::string& reason) const;
  // Calls so far by the path their border data took (hetcclPath_t, as
  // borderPath() names the paths): each collective and send/recv of a
  // group call counts once. Any thread.
  void countCalls(hetcclPath_t path, size_t n) { pathCalls_[path].fetch_add(n, std::memory_order_relaxed); }
  uint64_t pathCalls(hetcclPath_t path) const { return pathCalls_[path].load(std::memory_order_relaxed); }
  // The device border (GPU ranks, HETCCL_GPU_BORDER), else null.
  DeviceBorder* deviceBorder() { return border_.get(); }
  // The device reduction kernels (GPU ranks with a device border), else null.
  const hetcclKernelsApi_t* kernels() const { return kernels_; }
  // HETCCL_PLAN_FOLDS: border folds after whole receives (plan-level folds).
  bool planFolds() const { return planFolds_; }
  size_t buffBytes() const { return buffBytes_; }
  size_t smallBytes() const { return smallBytes_; }
  size_t chunkBytes() const { return chunkBytes_; }  // HETCCL_CHUNK_BYTES, equal on every rank
  // GPU ranks: the priority of hetccl's own streams (HETCCL_GPU_STREAM_PRIORITY).
  DeviceRuntime::Priority streamPriority() const { return streamPriority_; }
  // HETCCL_BORDER_CUT: by global rank, the weights of the bandwidth cut;
  // empty under the size cut. Equal on every rank.
  const std::vector<double>& borderWeights() const { return borderCut_.weight; }
  const BorderCut& borderCut() const { return borderCut_; }
  bool checkMismatch() const { return checkMismatch_; }
  std::atomic<bool>& abortFlag() { return abort_; }
  // hetcclCommAbort's part, from any thread, also while init runs on the
  // proxy: sets the abort flag, which every wait polls, and has the group
  // backend release the vendor library's waits (its init's too).
  void abort();

  // The tag of the call in progress as the host backend reads it
  // (BackendContext::callTag); plans hold theirs in PlanContext::tag.
  MsgTag& callTag() { return callTag_; }
  uint64_t nextSeq() { return ++seq_; }
  // Shrinks made from this communicator so far (their rendezvous ids).
  uint64_t nextShrinkSeq() { return ++shrinkSeq_; }
  // The grow id this rank made (hetcclCommGetUniqueId) until a grow takes it.
  std::optional<IdContents>& pendingGrowId() { return growId_; }
  uint64_t nextSendSeq(int peer) { return ++sendSeq_[peer]; }
  uint64_t nextRecvSeq(int peer) { return ++recvSeq_[peer]; }

  // Resolves a user op to what runs; throws InvalidArgument on an op that is
  // neither built in nor a live PreMulSum of this communicator.
  ReduceOp resolveOp(hetcclRedOp_t op, DataType dt) const;
  // `at` non-null: the scalar is read from there when each call runs.
  hetcclRedOp_t createPreMulSum(double scalar, DataType dt, const void* at = nullptr);
  void destroyOp(hetcclRedOp_t op);

  // The first error of a failed call sticks: later calls report it.
  void setAsyncError(hetcclResult_t r) {
    hetcclResult_t expect = hetcclSuccess;
    asyncError_.compare_exchange_strong(expect, r);
  }
  hetcclResult_t asyncError() const { return asyncError_.load(); }
  // A call failed after it began to move data: this rank is out of step with
  // its peers. The communicator fails for good here (the first failure's
  // code and text stick), and the transport tells the peers, whose waits
  // then fail at once instead of at their timeout. Any thread.
  // Returns the communicator's first failure (this text if it is the first).
  std::string fail(hetcclResult_t code, const std::string& text);
  std::string failureText() const;

  // GPU ranks across groups (comm/host_ranks.cc): the other ranks on this
  // host are watched while a call of this rank waits, so that a rank whose
  // process ended fails the call in about a tenth of a second instead of at
  // HETCCL_TIMEOUT_S. A stalled rank's process lives on: it is still judged
  // by the timeout. Only a dead rank the call still waits on counts
  // (`waitsOn`, by global rank): one of this rank's group (the vendor
  // library's group steps), or the border peer whose stores the call's
  // streams wait for; a peer that stored everything and then exited (a
  // broadcast's root done before its readers) does not fail the call.
  // Where such a rank ended, or another rank of this host marked the
  // job's failure word (border/device_border.h), checkHostRanks() fails
  // the communicator naming it (its pid, this host and `call`, e.g.
  // "device border AllReduce of 4096 bytes"), releases every stream wait
  // of this rank, aborts the group's vendor library (whose waits for that
  // rank would never end) and throws ProcessEndedError. Any thread; a
  // system call per watched rank.
  void checkHostRanks(const std::string& call, const std::function<bool(int rank)>& waitsOn);
  // Waits for e (HETCCL_TIMEOUT_S, the abort flag) like waitEvent, with
  // checkHostRanks(call, waitsOn) about every kWaitCheckEveryS
  // (device/event_wait.h).
  void waitWatchingHostRanks(Event e, const std::string& call, const std::function<bool(int rank)>& waitsOn);
  // `text`, and where a watched rank of this host has died, that too: the
  // proxy's and the watcher's failures (a vendor library that failed by
  // itself names its own ranks, or none).
  std::string withDeadHostRank(const std::string& text) const;
  // Whether global rank r is of this rank's group (its vendor library's).
  bool inMyGroup(int r) const { return topo_.groupOf[r] == topo_.groupOf[rank_]; }
  size_t watchedHostRanks() const { return hostRanks_.size(); }

  // Scratch memory for border staging, bounded by HETCCL_BUFFSIZE per use.
  uint8_t* scratch(size_t bytes);

  // The proxy runs, in submission order, what a GPU rank's calls hand over
  // (staged calls, vendor calls after them) and every call of a
  // non-blocking communicator; the watcher watches GPU calls across groups
  // to their end (bounded by HETCCL_TIMEOUT_S and the abort flag), so that
  // a watch never holds up the proxy's next job.
  Proxy& proxy() { return proxy_; }
  Proxy& watcher() { return watcher_; }
  // Queues a watch on the watcher behind everything queued on the proxy
  // so far (through a proxy job, unless this is the proxy's thread): the
  // watcher's jobs then come in the proxy's order, which the flight
  // records' steps rely on (api_coll.cc). `finally` runs however the watch
  // ends, or when either thread drops it.
  void watch(std::function<void()> job, std::function<void()> finally);
  // Until neither has work queued or running (the proxy first: its jobs
  // hand watches to the watcher).
  void drain() {
    proxy_.drain();
    watcher_.drain();
  }

  // What the metrics endpoint reads (observe/metrics_server.h; comm_status.cc).
  std::string metricsLabels() const override;
  std::string infoLabels() const override;
  bool failedForGood() const override { return asyncError() != hetcclSuccess; }
  const CallMetrics& counters() const override { return metrics_; }
  std::string statusObject() const override;
  int portOffset() const override { return hostIndex_; }

  // API calls in flight on this communicator (Abort waits for them to leave).
  std::atomic<int> activeCalls{0};
  // A data call is running (ExclusiveUse).
  std::atomic<bool> inCall{false};

 private:
  CommOptions opts_;
  int rank_, nranks_;
  CallMetrics metrics_;  // before flight_, which counts into it
  bool metricsOn_;
  FlightRecorder flight_;
  std::string flightId_ = "uninitialised";  // the job id in hex once init has it (under failMu_)
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> pathCalls_[hetcclNumPaths] = {};
  std::atomic<hetcclResult_t> asyncError_{hetcclSuccess};
  mutable std::mutex failMu_;
  std::string failText_;
  std::atomic<bool> ready_{false};
  std::unique_ptr<Bootstrap> bootstrap_;
  Topology topo_;
  std::unique_ptr<DeviceRuntime> device_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Backend> backend_;
  std::mutex backendMu_;  // orders abort() with init's creation of backend_
  std::unique_ptr<StagingState> stagingState_;
  std::unique_ptr<DeviceBorder> border_;
  // Declared after what they refer to (the backend, the flight recorder's
  // listener), so they go first.
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<Backend> observedBackend_;
  int hostIndex_ = 0;
  std::string transportName_;          // "shm", "tcp", "ucx", or "shm+tcp" (intra+inter) where both are used
  std::string intraName_, interName_;  // the transports of peers on this host and on others
  std::vector<int> hostOf_;            // by global rank: the lowest rank on its host
  TransportContext relayContext_;      // the transports' context, for the device border's relay
  LinkSecurity security_;
  BorderCut borderCut_;
  std::string site_;
  size_t buffBytes_ = 0, smallBytes_ = 0, chunkBytes_ = 0;
  DeviceRuntime::Priority streamPriority_ = DeviceRuntime::Priority::kHighest;
  ProcessWatch hostRanks_;  // GPU ranks across groups: the other ranks on this host
  bool checkMismatch_ = false;
  bool planFolds_ = false;
  const hetcclKernelsApi_t* kernels_ = nullptr;
  MsgTag callTag_;
  uint64_t seq_ = 0, shrinkSeq_ = 0;
  std::optional<IdContents> growId_;
  std::map<int, uint64_t> sendSeq_, recvSeq_;
  struct PreMul {
    bool live;
    double scalar;
    DataType dt;
    const void* at;
  };
  std::vector<PreMul> premul_;
  std::vector<uint8_t> scratch_;
  // abort()'s and checkHostRanks()' release: every stream wait of this
  // rank first, then the vendor library's abort (which synchronises the
  // device, and so would wait for those streams for ever).
  void releaseThenAbortLibrary();
  // init after the bootstrap ring is up: topology, transport, backend,
  // device state (comm_setup.cc), in these steps:
  void setUp(const PeerInfo& me, const std::string& group);
  // The peer records (the group map checked) and the topology.
  std::vector<PeerInfo> readPeers(const PeerInfo& me);
  // Each link class's transport and which links are encrypted.
  void chooseTransports(const std::vector<PeerInfo>& peers, const PeerInfo& me);
  // One allgather: the settings every rank must share, checked; returns
  // this rank's wall-clock offset to rank 0's (the timeline).
  // `processes`: every rank's process (by global rank), for watchHostRanks.
  double agreeAcrossRanks(double wallNowUs, std::vector<ProcessIdentity>* processes);
  // The ranks on this host whose processes checkHostRanks() watches.
  void watchHostRanks(const std::vector<PeerInfo>& peers, const std::vector<ProcessIdentity>& processes);
  void openTracer(const std::string& group, double clockOffsetUs);
  // The transports (observed where metrics or a trace are on); returns the
  // unobserved one the group's host backend and the link probe use.
  Transport& makeTransports(const std::vector<PeerInfo>& peers, const PeerInfo& me);
  // The bandwidth cut, and the cost model's HETCCL_SMALL_BYTES where unset.
  void planCuts(const std::vector<PeerInfo>& peers, Transport& groupTransport);
  // The group's backend (its vendor library joined) and its observed wrapper.
  void makeBackend(Transport& groupTransport, size_t settingSmallBytes);
  // The device border where HETCCL_GPU_BORDER and the topology allow
  // (collective: every rank of a multi-group GPU communicator calls it).
  void setUpDeviceBorder();
  // Last members: their threads stop before the rest is destroyed (the
  // proxy's first, as its jobs hand work to the watcher).
  Proxy watcher_;
  Proxy proxy_;
};

}  // namespace hetccl

// The C handle is the Comm.
struct hetcclComm : hetccl::Comm {
  using hetccl::Comm::Comm;
};
