// The drop-in's version, error and communicator entry points.
#include <cstring>
#include <thread>
#include <vector>

#include "api/comm_create.h"
#include "device/gpu_api.h"
#include "dropin/dropin.h"

using namespace hetccl;
using namespace hetccl::dropin;

namespace {

// hetccl's own result codes are NCCL's.
ncclResult_t code(hetcclResult_t r) { return static_cast<ncclResult_t>(r); }

hetcclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const void* config,
                        const char* fn) {
  hetcclResult_t r = guard(nullptr, fn, [&] {
    HETCCL_CHECK_ARG(comm, "comm (output pointer) is NULL");
    *comm = nullptr;
    CommOptions opts = optionsFrom(config);
    refuseForeignNccl();
    hetcclUniqueId hid;
    memcpy(&hid, &id, sizeof(hid));
    *comm = createComm(decodeUniqueId(hid), nranks, rank, opts);
  });
  return startedResult(r, comm ? *comm : nullptr);
}

}  // namespace

extern "C" {

// Marks this library as hetccl's (the nccl backend refuses to load it).
extern const char hetcclDropinFlavor[];  // external linkage (a const would be internal)
const char hetcclDropinFlavor[] = DROPIN_FLAVOR;

ncclResult_t ncclGetVersion(int* version) {
  return code(guard(nullptr, "ncclGetVersion", [&] {
    HETCCL_CHECK_ARG(version, "version is NULL");
    *version = dropinVersion();
  }));
}

const char* ncclGetErrorString(ncclResult_t r) { return hetcclGetErrorString(static_cast<hetcclResult_t>(r)); }
const char* ncclGetLastError(ncclComm_t comm) { return hetcclGetLastError(comm); }

void ncclResetDebugInit() {
  if (const nccl::NcclApi* v = vendorLibrary(); v && v->resetDebugInit) v->resetDebugInit();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  return code(hetcclGetUniqueId(reinterpret_cast<hetcclUniqueId*>(id)));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* config) {
  return code(initRank(comm, nranks, id, rank, config, "ncclCommInitRankConfig"));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return code(initRank(comm, nranks, id, rank, nullptr, "ncclCommInitRank"));
}

// One rendezvous root serves any number of ranks: the first id is the one.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, ncclUniqueId* ids,
                                      void* config) {
  if (nId < 1 || !ids)
    return code(guard(nullptr, "ncclCommInitRankScalable",
                      [&] { throwError(hetcclInvalidArgument, "nId must be >= 1 with a non-NULL id array"); }));
  return code(initRank(comm, nranks, ids[0], rank, config, "ncclCommInitRankScalable"));
}

// One process, ndev GPUs: the ranks' inits run together, as in a group.
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return code(guard(nullptr, "ncclCommInitAll", [&] {
    HETCCL_CHECK_ARG(comms && ndev > 0, "comms is NULL or ndev < 1");
    hetcclUniqueId id;
    if (hetcclGetUniqueId(&id) != hetcclSuccess) throw Error(hetcclSystemError, hetcclGetLastError(nullptr));
    const bool gpu = deviceKind() != "host";
    const GpuApi* api = gpu ? &loadGpuApi(deviceKind()) : nullptr;
    int saved = 0;
    if (api) api->check(api->getDevice(&saved), "getDevice");
    std::vector<PendingInit> inits;
    try {
      for (int i = 0; i < ndev; ++i) {
        int dev = devlist ? devlist[i] : i;
        if (api) api->check(api->setDevice(dev), "setDevice");  // the rank's device is the current one
        CommOptions opts = optionsFrom(nullptr);
        ++threadGroup().depth;  // deferred: started together below
        hetcclComm* c = nullptr;
        try {
          c = createComm(decodeUniqueId(id), ndev, i, opts);
        } catch (...) {
          --threadGroup().depth;
          throw;
        }
        --threadGroup().depth;
        comms[i] = c;
        inits.push_back(threadGroup().inits.back());
        threadGroup().inits.pop_back();
      }
      if (api) api->check(api->setDevice(saved), "setDevice");
      runPendingInits(inits);
    } catch (...) {
      for (const PendingInit& p : inits) hetcclCommAbort(p.comm);
      throw;
    }
  }));
}

// Split and shrink: with no config the parent's settings, as NCCL; the
// device and its library are always the parent's.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, void* config) {
  hetcclResult_t r = guard(comm, "ncclCommSplit", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    CommRef ref(comm);
    CommOptions opts = config ? optionsFrom(config) : inheritedOptions(*comm);
    opts.deviceKind = comm->options().deviceKind;
    opts.backend = comm->options().backend;
    *newcomm = splitComm(comm, color, key, opts);
  });
  return code(startedResult(r, newcomm ? *newcomm : nullptr));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanks, int excludeCount, ncclComm_t* newcomm, void* config,
                            int shrinkFlags) {
  hetcclResult_t r = guard(comm, "ncclCommShrink", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    HETCCL_CHECK_ARG(excludeCount >= 0 && (excludeCount == 0 || excludeRanks),
                     "excludeRanksList is NULL with excludeRanksCount " + std::to_string(excludeCount));
    CommRef ref(comm);
    CommOptions opts = config ? optionsFrom(config) : inheritedOptions(*comm);
    opts.deviceKind = comm->options().deviceKind;
    opts.backend = comm->options().backend;
    *newcomm = shrinkComm(comm, std::vector<int>(excludeRanks, excludeRanks + excludeCount), opts, shrinkFlags);
  });
  return code(startedResult(r, newcomm ? *newcomm : nullptr));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return code(hetcclCommFinalize(comm)); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return code(hetcclCommDestroy(comm)); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return code(hetcclCommAbort(comm)); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  return code(hetcclCommGetAsyncError(comm, reinterpret_cast<hetcclResult_t*>(err)));
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return code(hetcclCommCount(comm, count)); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return code(hetcclCommUserRank(comm, rank)); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return code(guard(comm, "ncclCommCuDevice", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(device, "device is NULL");
    *device = comm->device().deviceId();
  }));
}

// Revoking stops the communicator's work for good (it may then be shrunk or
// destroyed): in one group the vendor library's own revoke, and hetccl's
// communicator fails.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return code(guard(comm, "ncclCommRevoke", [&] {
    CommRef ref(comm);
    if (Vendor v = vendorOf(comm, true); v && v.api->commRevoke)
      vendorCheck(v, v.api->commRevoke(v.comm, revokeFlags), "ncclCommRevoke");
    comm->fail(hetcclInvalidUsage, "the communicator was revoked (ncclCommRevoke)");
    comm->abortFlag().store(true);
  }));
}

// Suspend, resume and memory statistics concern the vendor library's device
// memory: its communicator of this rank's group answers, in any layout.
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  return code(guard(comm, "ncclCommSuspend", [&] {
    CommRef ref(comm);
    Vendor v = vendorOf(comm, false);
    if (!v || !v.api->commSuspend)
      refuse("ncclCommSuspend", "here: this rank's group library " +
                                    std::string(v ? "is older than NCCL 2.29.7" : "is not an NCCL-ABI library"));
    vendorCheck(v, v.api->commSuspend(v.comm, flags), "ncclCommSuspend");
  }));
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  return code(guard(comm, "ncclCommResume", [&] {
    CommRef ref(comm);
    Vendor v = vendorOf(comm, false);
    if (!v || !v.api->commResume)
      refuse("ncclCommResume", "here: this rank's group library " +
                                   std::string(v ? "is older than NCCL 2.29.7" : "is not an NCCL-ABI library"));
    vendorCheck(v, v.api->commResume(v.comm), "ncclCommResume");
  }));
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value) {
  return code(guard(comm, "ncclCommMemStats", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(value, "value is NULL");
    Vendor v = vendorOf(comm, false);
    if (!v || !v.api->commMemStats)
      refuse("ncclCommMemStats", "here: this rank's group library " +
                                     std::string(v ? "is older than NCCL 2.29.7" : "is not an NCCL-ABI library"));
    vendorCheck(v, v.api->commMemStats(v.comm, stat, value), "ncclCommMemStats");
  }));
}

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, void* props) {
  return code(guard(comm, "ncclCommQueryProperties", [&] {
    CommRef ref(comm);
    Vendor v = vendorOf(comm, true);
    if (!v || !v.api->commQueryProperties)
      refuse("ncclCommQueryProperties", v ? "here: the vendor library is older than NCCL 2.29"
                                          : "across groups (the properties describe one NCCL communicator)");
    vendorCheck(v, v.api->commQueryProperties(v.comm, props), "ncclCommQueryProperties");
  }));
}

// Growing, in any layout as shrink: the grown communicator is set up as at
// init (one group's vendor communicator made anew). Running ranks keep the
// parent's device and library, and with no config its settings; new ranks
// take their own, as at init.
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return code(guard(comm, "ncclCommGetUniqueId", [&] {
    HETCCL_CHECK_ARG(uniqueId, "uniqueId (output pointer) is NULL");
    CommRef ref(comm);
    hetcclUniqueId id = growId(comm);
    memcpy(uniqueId, &id, sizeof(id));
  }));
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nranks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          void* config) {
  hetcclResult_t r = guard(comm, "ncclCommGrow", [&] {
    HETCCL_CHECK_ARG(newcomm, "newcomm (output pointer) is NULL");
    *newcomm = nullptr;
    hetcclUniqueId id;
    if (uniqueId) memcpy(&id, uniqueId, sizeof(id));
    if (!comm) {
      HETCCL_CHECK_ARG(uniqueId, "uniqueId is NULL: a new rank (comm NULL) joins with ncclCommGetUniqueId's id");
      HETCCL_CHECK_ARG(rank >= 0, "rank " + std::to_string(rank) +
                                      ": a new rank (comm NULL) passes its rank in the grown communicator");
      CommOptions opts = optionsFrom(config);
      refuseForeignNccl();
      *newcomm = joinGrownComm(decodeUniqueId(id), nranks, rank, opts);
      return;
    }
    CommRef ref(comm);
    CommOptions opts = config ? optionsFrom(config) : inheritedOptions(*comm);
    opts.deviceKind = comm->options().deviceKind;
    opts.backend = comm->options().backend;
    *newcomm = growComm(comm, nranks, rank, uniqueId ? &id : nullptr, opts);
  });
  return code(startedResult(r, newcomm ? *newcomm : nullptr));
}

}  // extern "C"
