// extern "C" entry points: version, errors, communicator life cycle, ops.
#include <chrono>
#include <algorithm>
#include <cstring>
#include <thread>

#include "elements/lowp.h"
#include "api/comm_create.h"
#include "api/guard.h"
#include "bootstrap/launcher.h"
#include "bootstrap/root.h"
#include "border/device_border.h"
#include "core/settings.h"
#include "core/log.h"
#include "topology/border.h"

using namespace hetccl;

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
    IdContents id = startRootServer(at, newIdContents(at), static_cast<double>(settings::kTimeoutS.get()));
    *uniqueId = encodeUniqueId(id);
  });
}

hetcclResult_t hetcclCommInitRankConfig(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank,
                                        hetcclConfig_t* config) {
  hetcclResult_t r = guard(nullptr, "hetcclCommInitRank", [&] {
    HETCCL_CHECK_ARG(comm, "comm (output pointer) is NULL");
    *comm = nullptr;
    IdContents id = decodeUniqueId(commId);
    CommOptions opts = readOptionsOrReport(config, id, rank, nranks);
    *comm = createComm(id, nranks, rank, opts);
  });
  return startedResult(r, comm ? *comm : nullptr);
}

hetcclResult_t hetcclCommInitRank(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank) {
  return hetcclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

hetcclResult_t hetcclCommInitFromEnv(hetcclComm_t* comm, hetcclConfig_t* config) {
  hetcclResult_t r = guard(nullptr, "hetcclCommInitFromEnv", [&] {
    HETCCL_CHECK_ARG(comm, "comm (output pointer) is NULL");
    *comm = nullptr;
    LaunchInfo li = detectLauncher();
    IdContents id;
    id.root = li.root;
    id.jobId = li.jobId;
    id.secret = li.secret;
    id.weakSecret = li.weakSecret;
    if (li.rank == 0) startLauncherRoot(id, li.weakSecret);
    // After the root is up: a rank whose settings are bad tells the others.
    CommOptions opts = readOptionsOrReport(config, id, li.rank, li.nranks);
    LOG_INFO(kBootstrap, "%s: rank %d of %d, rendezvous at %s", li.launcher.c_str(), li.rank, li.nranks,
             li.root.str().c_str());
    *comm = createComm(id, li.nranks, li.rank, opts);
  });
  return startedResult(r, comm ? *comm : nullptr);
}

hetcclResult_t hetcclCommSplit(hetcclComm_t comm, int color, int key, hetcclComm_t* newcomm, hetcclConfig_t* config) {
  hetcclResult_t r = guard(comm, "hetcclCommSplit", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    CommRef ref(comm);
    CommOptions opts = config ? readOptions(config) : inheritedOptions(*comm);
    // The device and its library are the parent's unless the config names others.
    bool namesDevice = config && config->size >= offsetof(hetcclConfig_t, backend) + sizeof(const char*);
    if (!namesDevice || !config->device) opts.deviceKind = comm->options().deviceKind;
    if (!namesDevice || !config->backend) opts.backend = comm->options().backend;
    *newcomm = splitComm(comm, color, key, opts);
  });
  return startedResult(r, newcomm ? *newcomm : nullptr);
}

hetcclResult_t hetcclCommShrink(hetcclComm_t comm, const int* excludeRanks, int excludeCount, hetcclComm_t* newcomm,
                                hetcclConfig_t* config, int shrinkFlags) {
  hetcclResult_t r = guard(comm, "hetcclCommShrink", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    HETCCL_CHECK_ARG(excludeCount >= 0 && (excludeCount == 0 || excludeRanks),
                     "excludeRanks is NULL with excludeCount " + std::to_string(excludeCount));
    CommRef ref(comm);
    CommOptions opts = config ? readOptions(config) : inheritedOptions(*comm);
    bool namesDevice = config && config->size >= offsetof(hetcclConfig_t, backend) + sizeof(const char*);
    if (!namesDevice || !config->device) opts.deviceKind = comm->options().deviceKind;
    if (!namesDevice || !config->backend) opts.backend = comm->options().backend;
    *newcomm = shrinkComm(comm, std::vector<int>(excludeRanks, excludeRanks + excludeCount), opts, shrinkFlags);
  });
  return startedResult(r, newcomm ? *newcomm : nullptr);
}

hetcclResult_t hetcclCommGetUniqueId(hetcclComm_t comm, hetcclUniqueId* uniqueId) {
  return guard(comm, "hetcclCommGetUniqueId", [&] {
    HETCCL_CHECK_ARG(uniqueId, "uniqueId (output pointer) is NULL");
    CommRef ref(comm);
    *uniqueId = growId(comm);
  });
}

hetcclResult_t hetcclCommGrow(hetcclComm_t comm, int nranks, const hetcclUniqueId* uniqueId, int rank,
                              hetcclComm_t* newcomm, hetcclConfig_t* config) {
  hetcclResult_t r = guard(comm, "hetcclCommGrow", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    if (!comm) {
      HETCCL_CHECK_ARG(uniqueId, "uniqueId is NULL: a new rank (comm NULL) joins with hetcclCommGetUniqueId's id");
      HETCCL_CHECK_ARG(rank >= 0, "rank " + std::to_string(rank) +
                                      ": a new rank (comm NULL) passes its rank in the grown communicator");
      IdContents id = decodeUniqueId(*uniqueId);
      *newcomm = joinGrownComm(id, nranks, rank, readOptionsOrReport(config, id, rank, nranks));
      return;
    }
    CommRef ref(comm);
    CommOptions opts = config ? readOptions(config) : inheritedOptions(*comm);
    bool namesDevice = config && config->size >= offsetof(hetcclConfig_t, backend) + sizeof(const char*);
    if (!namesDevice || !config->device) opts.deviceKind = comm->options().deviceKind;
    if (!namesDevice || !config->backend) opts.backend = comm->options().backend;
    *newcomm = growComm(comm, nranks, rank, uniqueId, opts);
  });
  return startedResult(r, newcomm ? *newcomm : nullptr);
}

hetcclResult_t hetcclCommFinalize(hetcclComm_t comm) {
  // Host ranks: blocking calls complete before they return; a non-blocking
  // communicator's queued work is flushed here.
  return guard(comm, "hetcclCommFinalize", [&] {
    CommRef ref(comm);
    comm->drain();
  });
}

hetcclResult_t hetcclCommDestroy(hetcclComm_t comm) {
  return guard(comm, "hetcclCommDestroy", [&] {
    if (!comm) return;     // as NCCL: destroying NULL is a no-op
    retireIdleComm(comm);  // later calls are refused from here on
    comm->drain();         // non-blocking work still queued finishes first, and watched GPU calls
    delete comm;
  });
}

hetcclResult_t hetcclCommAbort(hetcclComm_t comm) {
  return guard(comm, "hetcclCommAbort", [&] {
    if (!comm) return;
    retireComm(comm);  // later calls are refused from here on
    comm->abort();     // releases every wait, the vendor library's included
    waitUntilIdle(comm);
    delete comm;
  });
}

hetcclResult_t hetcclCommGetAsyncError(hetcclComm_t comm, hetcclResult_t* asyncError) {
  return guard(comm, "hetcclCommGetAsyncError", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(asyncError, "asyncError is NULL");
    *asyncError = comm->asyncError();
    if (*asyncError != hetcclSuccess) {
      // Failed for good (Comm::fail): its reason is what hetcclGetLastError says.
      std::string why = comm->failureText();
      if (!why.empty()) recordError(comm, "communicator", *asyncError, why);
      return;
    }
    std::string why;
    const int by = comm->ready() && comm->deviceBorder() ? comm->deviceBorder()->failedRank(&why) : -1;
    if (by >= 0 && by != comm->rank()) {
      // A rank of the job failed its communicator (the device border's
      // shared header says so): this one cannot go on either, and a rank
      // with nothing in flight learns of it here (a watchdog's poll).
      const std::string cause =
          comm->fail(hetcclRemoteError, "rank " + std::to_string(by) + "'s communicator failed (" + why + ")");
      *asyncError = comm->asyncError();  // the first failure's, should another thread's have come first
      recordError(comm, "communicator", *asyncError, cause);
      return;
    }
    if (comm->ready()) {
      *asyncError = comm->groupBackend().asyncError();
      if (*asyncError != hetcclSuccess && *asyncError != hetcclInProgress)
        recordError(comm, "vendor library", *asyncError, comm->groupBackend().asyncErrorText());
    }
    if (*asyncError == hetcclSuccess) {
      *asyncError = comm->proxy().status();
      // GPU work in flight on a blocking communicator is not an error (as NCCL).
      if (*asyncError == hetcclInProgress && comm->ready() && comm->isGpuRank()) *asyncError = hetcclSuccess;
      // Make the failure's text what hetcclGetLastError reports.
      if (*asyncError != hetcclSuccess && *asyncError != hetcclInProgress)
        recordError(comm, "non-blocking call", *asyncError, comm->proxy().errorText());
    }
  });
}

hetcclResult_t hetcclCommCount(const hetcclComm_t comm, int* count) {
  return guard(comm, "hetcclCommCount", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(count, "count is NULL");
    *count = comm->nranks();
  });
}

hetcclResult_t hetcclCommUserRank(const hetcclComm_t comm, int* rank) {
  return guard(comm, "hetcclCommUserRank", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(rank, "rank is NULL");
    *rank = comm->rank();
  });
}

hetcclResult_t hetcclCommGetInfo(const hetcclComm_t comm, hetcclCommInfo_t* info) {
  return guard(comm, "hetcclCommGetInfo", [&] {
    CommRef ref(comm);
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
    out.myGroupRank = comm->groupRank();
    for (int g = 0; g < t.ngroups(); ++g) {
      out.groupSize[g] = static_cast<int>(t.groups[g].ranks.size());
      snprintf(out.groupName[g], HETCCL_NAME_BYTES, "%s", t.groups[g].name.c_str());
      snprintf(out.groupBackend[g], HETCCL_NAME_BYTES, "%s", defaultBackendFor(t.groups[g].deviceKind).c_str());
    }
    snprintf(out.deviceKind, HETCCL_NAME_BYTES, "%s", comm->device().kind());
    snprintf(out.transport, HETCCL_NAME_BYTES, "%s", comm->transportName().c_str());
    out.borderPeers = largeAllReduceBorderPeers(t, comm->rank());
    snprintf(out.borderPath, HETCCL_NAME_BYTES, "%s", comm->borderPath());
    for (int p = 0; p < hetcclNumPaths; ++p) out.pathCalls[p] = comm->pathCalls(static_cast<hetcclPath_t>(p));
    snprintf(out.site, HETCCL_NAME_BYTES, "%s", comm->site().c_str());
    snprintf(out.encrypt, HETCCL_NAME_BYTES, "%s", comm->encryptMode().c_str());
    out.encryptedPeers = comm->encryptedPeers();
    out.plainPeers = comm->nranks() - 1 - out.encryptedPeers;
    const BorderCut& cut = comm->borderCut();
    snprintf(out.borderCut, HETCCL_NAME_BYTES, "%s", cut.mode.c_str());
    const std::vector<int>& mates = t.groups[comm->myGroup()].ranks;
    out.borderShare = 1.0 / static_cast<double>(mates.size());
    if (!cut.weight.empty()) {
      double all = 0;
      for (int r : mates) all += cut.weight[r];
      out.borderGbps = cut.gbps[comm->rank()];
      out.borderShare = cut.weight[comm->rank()] / all;
    }
    size_t n = info->size < sizeof(out) ? info->size : sizeof(out);
    memcpy(info, &out, n);
    info->size = n;
  });
}

hetcclResult_t hetcclRedOpCreatePreMulSum(hetcclRedOp_t* op, void* scalar, hetcclDataType_t datatype,
                                          hetcclScalarResidence_t residence, hetcclComm_t comm) {
  return guard(comm, "hetcclRedOpCreatePreMulSum", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(op, "op (output pointer) is NULL");
    HETCCL_CHECK_ARG(scalar, "scalar is NULL");
    HETCCL_CHECK_ARG(dataTypeValid(datatype),
                     "datatype " + std::to_string(static_cast<int>(datatype)) + " is not a hetccl data type");
    HETCCL_CHECK_ARG(residence == hetcclScalarHostImmediate || residence == hetcclScalarDevice,
                     "residence " + std::to_string(static_cast<int>(residence)) + " is unknown");
    const void* at = nullptr;
    if (residence == hetcclScalarDevice) {
      // Read when each call runs, as NCCL reads it: device memory on GPU
      // ranks, the rank's own memory on host ranks.
      MemKind k = comm->device().pointerKind(scalar);
      if (comm->isGpuRank())
        HETCCL_CHECK_ARG(k == MemKind::kDevice || k == MemKind::kPinnedHost,
                         std::string("scalar with device residence is ") + memKindName(k) + ", but this " +
                             comm->device().kind() + " rank's collectives read it on its device");
      else
        HETCCL_CHECK_ARG(k != MemKind::kOtherDevice,
                         "scalar with device residence is GPU memory, but this rank is a host rank (device kind "
                         "host): pass host memory");
      at = scalar;
    }
    double s = at ? 1.0 : elementToDouble(scalar, datatype);
    *op = comm->createPreMulSum(s, datatype, at);
  });
}

hetcclResult_t hetcclRedOpDestroy(hetcclRedOp_t op, hetcclComm_t comm) {
  return guard(comm, "hetcclRedOpDestroy", [&] {
    CommRef ref(comm);
    comm->destroyOp(op);
  });
}

}  // extern "C"
