// extern "C" entry points: version, errors, communicator life cycle, ops.
#include <chrono>
#include <algorithm>
#include <cstring>
#include <thread>

#include "algorithm/lowp.h"
#include "api/guard.h"
#include "bootstrap/launcher.h"
#include "bootstrap/root.h"
#include "core/config.h"
#include "core/log.h"
#include "topology/border.h"

using namespace hetccl;

namespace {

hetcclComm* makeComm(const IdContents& id, int nranks, int rank, const CommOptions& opts) {
  HETCCL_CHECK_ARG(nranks >= 1 && nranks <= kMaxRanks, "nranks " + std::to_string(nranks) + " out of range");
  HETCCL_CHECK_ARG(rank >= 0 && rank < nranks,
                   "rank " + std::to_string(rank) + " out of range [0, " + std::to_string(nranks) + ")");
  auto* c = new hetcclComm(nranks, rank, opts);
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

// NCCL's convention: a non-blocking communicator's calls say "in progress".
hetcclResult_t started(hetcclResult_t r, hetcclComm_t comm) {
  return (r == hetcclSuccess && comm && !comm->options().blocking) ? hetcclInProgress : r;
}

}  // namespace

extern "C" {

hetcclResult_t hetcclGetVersion(int* version) {
  return guard(nullptr, "hetcclGetVersion", [&] {
    HETCCL_CHECK_ARG(version, "version is NULL");
    *version = HETCCL_VERSION_CODE;
  });
}

const char* hetcclGetErrorString(hetcclResult_t r) {
  switch (r) {
    case hetcclSuccess: return "no error";
    case hetcclUnhandledDeviceError: return "unhandled device (CUDA/HIP) error";
    case hetcclSystemError: return "unhandled system error (network, memory, file descriptors)";
    case hetcclInternalError: return "internal error - please report this issue";
    case hetcclInvalidArgument: return "invalid argument";
    case hetcclInvalidUsage: return "invalid usage";
    case hetcclRemoteError: return "remote process exited, went silent or there was a network error";
    case hetcclInProgress: return "operation in progress";
    default: return "unknown result code";
  }
}

const char* hetcclGetLastError(hetcclComm_t comm) { return lastErrorText(comm); }

hetcclResult_t hetcclGetUniqueId(hetcclUniqueId* uniqueId) {
  return guard(nullptr, "hetcclGetUniqueId", [&] {
    HETCCL_CHECK_ARG(uniqueId, "uniqueId is NULL");
    SockAddr at = SockAddr::local();
    IdContents id = startRootServer(at, newIdContents(at), static_cast<double>(config().getInt("HETCCL_TIMEOUT_S")));
    *uniqueId = encodeUniqueId(id);
  });
}

hetcclResult_t hetcclCommInitRankConfig(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank,
                                        hetcclConfig_t* config) {
  hetcclResult_t r = guard(nullptr, "hetcclCommInitRank", [&] {
    HETCCL_CHECK_ARG(comm, "comm (output pointer) is NULL");
    *comm = nullptr;
    CommOptions opts = readOptions(config);
    IdContents id = decodeUniqueId(commId);
    *comm = makeComm(id, nranks, rank, opts);
  });
  return started(r, comm ? *comm : nullptr);
}

hetcclResult_t hetcclCommInitRank(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank) {
  return hetcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

hetcclResult_t hetcclCommInitFromEnv(hetcclComm_t* comm, hetcclConfig_t* config) {
  hetcclResult_t r = guard(nullptr, "hetcclCommInitFromEnv", [&] {
    HETCCL_CHECK_ARG(comm, "comm (output pointer) is NULL");
    *comm = nullptr;
    CommOptions opts = readOptions(config);
    LaunchInfo li = detectLauncher();
    if (li.weakSecret)
      LOG_INFO(kBootstrap, "job secret derived from launcher variables; set HETCCL_JOB_SECRET for a strong one");
    IdContents id;
    id.root = li.root;
    id.jobId = li.jobId;
    id.secret = li.secret;
    if (li.rank == 0) {
      // The root listens on every address at the agreed port.
      SockAddr any = SockAddr::parse(li.root.ss.ss_family == AF_INET6 ? "[::]:0" : "0.0.0.0:0");
      any.setPort(li.root.port());
      startRootServer(any, id, opts.timeoutS);
    }
    LOG_INFO(kBootstrap, "%s: rank %d of %d, rendezvous at %s", li.launcher.c_str(), li.rank, li.nranks,
             li.root.str().c_str());
    *comm = makeComm(id, li.nranks, li.rank, opts);
  });
  return started(r, comm ? *comm : nullptr);
}

hetcclResult_t hetcclCommSplit(hetcclComm_t comm, int color, int key, hetcclComm_t* newcomm,
                               hetcclConfig_t* config) {
  hetcclResult_t r = guard(comm, "hetcclCommSplit", [&] {
    checkComm(comm);
    checkReady(comm);
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    HETCCL_CHECK_ARG(color >= 0 || color == HETCCL_SPLIT_NOCOLOR, "color must be >= 0 or HETCCL_SPLIT_NOCOLOR");
    *newcomm = nullptr;
    CallScope scope(comm);
    // Split uses the bootstrap ring on this thread: queued non-blocking work
    // (which may use the ring too) finishes first.
    comm->proxy().drain();
    CommOptions opts = readOptions(config);
    if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(comm->rank()).name;
    if (!config) {  // as NCCL: no config means the parent's settings
      opts.timeoutS = comm->options().timeoutS;
      opts.blocking = comm->options().blocking;
      opts.transport = comm->transportName();
    }
    // The device and its library are the parent's unless the config names others.
    bool namesDevice = config && config->size >= offsetof(hetcclConfig_t, backend) + sizeof(const char*);
    if (!namesDevice || !config->device) opts.deviceKind = comm->options().deviceKind;
    if (!namesDevice || !config->backend) opts.backend = comm->options().backend;
    if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
    const int n = comm->nranks();
    struct Entry {
      int32_t color, key;
      uint8_t id[HETCCL_UNIQUE_ID_BYTES];
    };
    std::vector<Entry> all(n);
    all[comm->rank()].color = color;
    all[comm->rank()].key = key;
    comm->bootstrap().allGather(all.data(), sizeof(Entry));
    std::vector<int> members;  // of my color, by (key, parent rank)
    for (int r = 0; r < n; ++r)
      if (color != HETCCL_SPLIT_NOCOLOR && all[r].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
    // The first member of each color runs the new communicator's root.
    memset(all[comm->rank()].id, 0, HETCCL_UNIQUE_ID_BYTES);
    if (!members.empty() && members[0] == comm->rank()) {
      SockAddr at = SockAddr::local();
      hetcclUniqueId uid = encodeUniqueId(startRootServer(at, newIdContents(at), opts.timeoutS));
      memcpy(all[comm->rank()].id, uid.internal, HETCCL_UNIQUE_ID_BYTES);
    }
    comm->bootstrap().allGather(all.data(), sizeof(Entry));
    if (members.empty()) return;
    hetcclUniqueId uid;
    memcpy(uid.internal, all[members[0]].id, HETCCL_UNIQUE_ID_BYTES);
    int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank()) - members.begin());
    *newcomm = makeComm(decodeUniqueId(uid), static_cast<int>(members.size()), newRank, opts);
  });
  return started(r, newcomm ? *newcomm : nullptr);
}

hetcclResult_t hetcclCommFinalize(hetcclComm_t comm) {
  // Host ranks: blocking calls complete before they return; a non-blocking
  // communicator's queued work is flushed here.
  return guard(comm, "hetcclCommFinalize", [&] {
    checkComm(comm);
    comm->proxy().drain();
  });
}

hetcclResult_t hetcclCommDestroy(hetcclComm_t comm) {
  return guard(comm, "hetcclCommDestroy", [&] {
    if (!comm) return;  // as NCCL: destroying NULL is a no-op
    checkComm(comm);
    HETCCL_CHECK_USAGE(comm->activeCalls.load() == 0, "comm is in use by another thread (use hetcclCommAbort)");
    comm->proxy().drain();  // non-blocking work still queued finishes first
    unregisterComm(comm);
    delete comm;
  });
}

hetcclResult_t hetcclCommAbort(hetcclComm_t comm) {
  return guard(comm, "hetcclCommAbort", [&] {
    if (!comm) return;
    checkComm(comm);
    comm->abortFlag().store(true);
    unregisterComm(comm);  // new calls are refused from here on
    if (comm->ready()) comm->groupBackend().abort();  // vendor libraries release their waits
    // Every wait polls the flag at least every 100 ms: the callers leave soon.
    while (comm->activeCalls.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    delete comm;
  });
}

hetcclResult_t hetcclCommGetAsyncError(hetcclComm_t comm, hetcclResult_t* asyncError) {
  return guard(comm, "hetcclCommGetAsyncError", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(asyncError, "asyncError is NULL");
    *asyncError = comm->asyncError();
    if (*asyncError == hetcclSuccess && comm->ready()) *asyncError = comm->groupBackend().asyncError();
    if (*asyncError == hetcclSuccess) {
      *asyncError = comm->proxy().status();
      // GPU work in flight on a blocking communicator is not an error (as NCCL).
      if (*asyncError == hetcclInProgress && comm->ready() && comm->deviceOrdered()) *asyncError = hetcclSuccess;
      // Make the failure's text what hetcclGetLastError reports.
      if (*asyncError != hetcclSuccess && *asyncError != hetcclInProgress)
        recordError(comm, "non-blocking call", *asyncError, comm->proxy().errorText());
    }
  });
}

hetcclResult_t hetcclCommCount(const hetcclComm_t comm, int* count) {
  return guard(comm, "hetcclCommCount", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(count, "count is NULL");
    *count = comm->nranks();
  });
}

hetcclResult_t hetcclCommUserRank(const hetcclComm_t comm, int* rank) {
  return guard(comm, "hetcclCommUserRank", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(rank, "rank is NULL");
    *rank = comm->rank();
  });
}

hetcclResult_t hetcclCommGetInfo(const hetcclComm_t comm, hetcclCommInfo_t* info) {
  return guard(comm, "hetcclCommGetInfo", [&] {
    checkComm(comm);
    checkReady(comm);
    HETCCL_CHECK_ARG(info, "info is NULL");
    HETCCL_CHECK_ARG(info->size >= offsetof(hetcclCommInfo_t, borderPeers),
                     "info->size " + std::to_string(info->size) + " is smaller than any version");
    hetcclCommInfo_t out{};
    out.size = sizeof(out);
    const Topology& t = comm->topo();
    out.rank = comm->rank();
    out.nranks = comm->nranks();
    out.ngroups = t.ngroups();
    out.myGroup = comm->myGroup();
    out.myGroupRank = comm->myLocal();
    for (int g = 0; g < t.ngroups(); ++g) {
      out.groupSize[g] = static_cast<int>(t.groups[g].ranks.size());
      snprintf(out.groupName[g], HETCCL_NAME_BYTES, "%s", t.groups[g].name.c_str());
      snprintf(out.groupBackend[g], HETCCL_NAME_BYTES, "%s", defaultBackendFor(t.groups[g].deviceKind).c_str());
    }
    snprintf(out.deviceKind, HETCCL_NAME_BYTES, "%s", comm->device().kind());
    snprintf(out.transport, HETCCL_NAME_BYTES, "%s", comm->transportName().c_str());
    // Border peers of a large AllReduce.
    std::vector<ShardLayout> layouts;
    for (const Group& g : t.groups) layouts.push_back(shardLayout(1 << 24, static_cast<int>(g.ranks.size()), false));
    out.borderPeers = borderPeerCount(assignBorder(t, layouts, comm->rank()), comm->rank());
    snprintf(out.borderPath, HETCCL_NAME_BYTES, "%s", comm->borderPath());
    size_t n = info->size < sizeof(out) ? info->size : sizeof(out);
    memcpy(info, &out, n);
    info->size = n;
  });
}

hetcclResult_t hetcclRedOpCreatePreMulSum(hetcclRedOp_t* op, void* scalar, hetcclDataType_t datatype,
                                          hetcclScalarResidence_t residence, hetcclComm_t comm) {
  return guard(comm, "hetcclRedOpCreatePreMulSum", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(op, "op (output pointer) is NULL");
    HETCCL_CHECK_ARG(scalar, "scalar is NULL");
    HETCCL_CHECK_ARG(dataTypeValid(datatype), "datatype " + std::to_string(static_cast<int>(datatype)) + " is not a hetccl data type");
    HETCCL_CHECK_ARG(residence == hetcclScalarHostImmediate || residence == hetcclScalarDevice,
                     "residence " + std::to_string(static_cast<int>(residence)) + " is unknown");
    // Host ranks: device residence means the rank's own (host) memory.
    double s = elementToDouble(scalar, datatype);
    CallScope scope(comm);
    *op = comm->createPreMulSum(s, datatype);
  });
}

hetcclResult_t hetcclRedOpDestroy(hetcclRedOp_t op, hetcclComm_t comm) {
  return guard(comm, "hetcclRedOpDestroy", [&] {
    checkComm(comm);
    comm->destroyOp(op);
  });
}

}  // extern "C"
