// libnccl.so.2 (and librccl.so.1, built from this file with
// HETCCL_DROPIN_RCCL): the NCCL ABI over hetccl, so that programs built for
// NCCL (PyTorch's ProcessGroupNCCL) run on a mixed cluster unmodified.
// Types, enum values and the unique id are NCCL's (hetccl shares them);
// communicators are hetccl communicators whose device kind defaults to cuda
// (hip for the RCCL build) and whose group steps run on the real vendor
// library, which the nccl backend loads by path and never confuses with this
// one. What hetccl cannot honour returns ncclInvalidUsage with a message.
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "backend/nccl/nccl_api.h"
#include "core/config.h"
#include "core/log.h"
#include "device/gpu_api.h"
#include "hetccl/hetccl.h"

using namespace hetccl;

#ifdef HETCCL_DROPIN_RCCL
#define DROPIN_FLAVOR "rccl"
#define DROPIN_SONAME "librccl.so.1"
#define DROPIN_DEVICE "hip"
#else
#define DROPIN_FLAVOR "nccl"
#define DROPIN_SONAME "libnccl.so.2"
#define DROPIN_DEVICE "cuda"
#endif

namespace {

using ncclResult_t = int;
using ncclComm_t = hetcclComm_t;
struct ncclUniqueId {
  char internal[HETCCL_UNIQUE_ID_BYTES];
};
static_assert(sizeof(ncclUniqueId) == sizeof(hetcclUniqueId), "unique ids differ in size");

// NCCL's ncclConfig_t starts like hetccl's: size, magic (the same value),
// version, blocking. Later fields (CTA counts, names, policies) tune NCCL's
// own kernels and have no meaning here.
struct NcclConfigHead {
  size_t size;
  unsigned magic;
  unsigned version;
  int blocking;
};

// The device kind of ranks created through this library.
std::string dropinDevice() {
  std::string d = config().getString("HETCCL_DEVICE");
  return config().isSet("HETCCL_DEVICE") ? d : std::string(DROPIN_DEVICE);
}

// Reads the head of the caller's ncclConfig_t: any NCCL version's struct
// (its size says how much there is), refused when it was not made by
// NCCL_CONFIG_INITIALIZER or its size is not that of a config.
hetcclConfig_t toConfig(const void* ncclConfig, std::string& device) {
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  device = dropinDevice();
  cfg.device = device.c_str();
  if (ncclConfig) {
    NcclConfigHead head;
    memcpy(&head, ncclConfig, sizeof(head));
    if (head.magic != HETCCL_CONFIG_MAGIC)
      throwError(hetcclInvalidArgument, "config was not initialised with NCCL_CONFIG_INITIALIZER (magic " +
                                            std::to_string(head.magic) + ")");
    if (head.size < sizeof(NcclConfigHead) || head.size > (size_t{1} << 16))
      throwError(hetcclInvalidArgument, "config size " + std::to_string(head.size) +
                                            " is not the size of any ncclConfig_t (at least " +
                                            std::to_string(sizeof(NcclConfigHead)) + " bytes)");
    cfg.blocking = head.blocking;
  }
  return cfg;
}

// Another NCCL-ABI library that a call by name would reach instead of this
// one: the process's global scope resolves ncclCommInitRank to it. Then some
// callers reach hetccl and others the vendor library, with handles that mean
// nothing to the other side. Returns its path, or "".
//
// Another copy merely loaded is harmless: PyTorch's wheels load their own
// libnccl.so.2 by path even when hetccl's is preloaded (LD_PRELOAD), and the
// global scope still finds hetccl's first. Libraries loaded RTLD_LOCAL are
// reached only through their handles, by callers that chose them.
std::string foreignNccl() {
  void* global = dlsym(RTLD_DEFAULT, "ncclCommInitRank");
  Dl_info self{}, where{};
  if (!global || !dladdr(global, &where) || !where.dli_fname) return "";
  if (dladdr(reinterpret_cast<void*>(&dropinDevice), &self) && self.dli_fbase == where.dli_fbase) return "";
  // Another hetccl drop-in (the other flavour) drives the same communicators.
  if (void* h = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
    bool hetccl = dlsym(h, "hetcclDropinFlavor") != nullptr;
    dlclose(h);
    if (hetccl) return "";
  }
  return where.dli_fname;
}

ncclResult_t unsupported(ncclComm_t comm, const char* fn, const std::string& what) {
  return guard(comm, fn, [&] { throwError(hetcclInvalidUsage, what + " is not supported by hetccl"); });
}

const GpuApi& gpu() { return loadGpuApi(DROPIN_DEVICE); }

}  // namespace

extern "C" {

// Marks this library as hetccl's (the nccl backend refuses to load it).
extern const char hetcclDropinFlavor[];  // external linkage (a const would be internal)
const char hetcclDropinFlavor[] = DROPIN_FLAVOR;

ncclResult_t ncclGetVersion(int* version) {
  return guard(nullptr, "ncclGetVersion", [&] {
    HETCCL_CHECK_ARG(version, "version is NULL");
    // The vendor library's version where it loads, so that callers enable
    // the features it has; else the ABI this library implements.
    *version = 22805;
    try {
      *version = nccl::loadNcclApi(DROPIN_FLAVOR).version;
    } catch (const Error&) {
    }
  });
}

const char* ncclGetErrorString(ncclResult_t r) { return hetcclGetErrorString(static_cast<hetcclResult_t>(r)); }
const char* ncclGetLastError(ncclComm_t comm) { return hetcclGetLastError(comm); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { return hetcclGetUniqueId(reinterpret_cast<hetcclUniqueId*>(id)); }

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* config) {
  hetcclUniqueId hid;
  memcpy(&hid, &id, sizeof(hid));
  std::string device;
  hetcclConfig_t cfg;
  hetcclResult_t r = guard(nullptr, "ncclCommInitRankConfig", [&] {
    cfg = toConfig(config, device);
    std::string other = foreignNccl();
    if (!other.empty())
      throwError(hetcclInvalidUsage, "another NCCL library (" + other + ") comes before hetccl's " DROPIN_SONAME
                                         " in this process's symbol lookup, so calls could reach either. Preload "
                                         "hetccl's (LD_PRELOAD or hetccl-torch-run): hetccl drives the vendor "
                                         "library itself (HETCCL_NCCL_LIB / HETCCL_RCCL_LIB)");
  });
  if (r != hetcclSuccess) return static_cast<ncclResult_t>(r);
  return static_cast<ncclResult_t>(hetcclCommInitRankConfig(comm, nranks, hid, rank, &cfg));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, ncclUniqueId* ids,
                                      void* config) {
  if (nId < 1 || !ids)
    return guard(nullptr, "ncclCommInitRankScalable",
                 [&] { throwError(hetcclInvalidArgument, "nId must be >= 1 with a non-NULL id array"); });
  return ncclCommInitRankConfig(comm, nranks, ids[0], rank, config);  // one rendezvous root serves all
}

// One process, ndev GPUs: one thread per device creates its rank.
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  hetcclResult_t r = guard(nullptr, "ncclCommInitAll", [&] {
    HETCCL_CHECK_ARG(comms && ndev > 0, "comms is NULL or ndev < 1");
    hetcclUniqueId id;
    if (hetcclGetUniqueId(&id) != hetcclSuccess) throw Error(hetcclSystemError, hetcclGetLastError(nullptr));
    std::vector<hetcclResult_t> res(ndev, hetcclSuccess);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i)
      threads.emplace_back([&, i] {
        int dev = devlist ? devlist[i] : i;
        if (dropinDevice() != "host" && gpu().setDevice(dev) != 0) {
          res[i] = hetcclInvalidArgument;
          return;
        }
        std::string device;
        hetcclConfig_t cfg = toConfig(nullptr, device);
        res[i] = hetcclCommInitRankConfig(&comms[i], ndev, id, i, &cfg);
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i)
      if (res[i] != hetcclSuccess)
        throwError(res[i], "rank " + std::to_string(i) + " (device " + std::to_string(devlist ? devlist[i] : i) +
                               ") failed to initialise");
  });
  return r;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, void* config) {
  if (!config) return hetcclCommSplit(comm, color, key, newcomm, nullptr);
  std::string device;
  hetcclConfig_t cfg = toConfig(config, device);
  cfg.device = nullptr;  // the parent's
  return hetcclCommSplit(comm, color, key, newcomm, &cfg);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return hetcclCommFinalize(comm); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return hetcclCommDestroy(comm); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return hetcclCommAbort(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  return hetcclCommGetAsyncError(comm, reinterpret_cast<hetcclResult_t*>(err));
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return hetcclCommCount(comm, count); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return hetcclCommUserRank(comm, rank); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guard(comm, "ncclCommCuDevice", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(device, "device is NULL");
    *device = comm->device().deviceId();
  });
}

// Registration only lets NCCL skip copies; hetccl's result is the same
// without it, so it is accepted (and logged), not refused.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guard(comm, "ncclCommRegister", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(handle, "handle is NULL");
    *handle = buff ? buff : reinterpret_cast<void*>(1);
    LOG_INFO(kInit, "ncclCommRegister(%p, %zu): hetccl does not use registrations; accepted without effect", buff,
             size);
  });
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guard(comm, "ncclCommDeregister", [&] {
    checkComm(comm);
    HETCCL_CHECK_ARG(handle, "handle is NULL");
  });
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void*, size_t, void*, int) {
  return unsupported(comm, "ncclCommWindowRegister", "symmetric memory windows (ncclCommWindowRegister)");
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, void*) {
  return unsupported(comm, "ncclCommWindowDeregister", "symmetric memory windows (ncclCommWindowDeregister)");
}
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void*, void*) {
  return unsupported(comm, "ncclDevCommCreate", "device-side communicators (ncclDevCommCreate)");
}
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void*) {
  return unsupported(comm, "ncclDevCommDestroy", "device-side communicators (ncclDevCommDestroy)");
}
ncclResult_t ncclCommShrink(ncclComm_t comm, int*, int, ncclComm_t* newcomm, void*, int) {
  if (newcomm) *newcomm = nullptr;
  return unsupported(comm, "ncclCommShrink", "ncclCommShrink (use ncclCommSplit)");
}
ncclResult_t ncclGroupSimulateEnd(void*) {
  return unsupported(nullptr, "ncclGroupSimulateEnd", "ncclGroupSimulateEnd (NCCL's cost model)");
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guard(nullptr, "ncclMemAlloc", [&] {
    HETCCL_CHECK_ARG(ptr, "ptr is NULL");
    gpu().check(gpu().malloc(ptr, size), "malloc");
  });
}
ncclResult_t ncclMemFree(void* ptr) {
  return guard(nullptr, "ncclMemFree", [&] { gpu().check(gpu().free(ptr), "free"); });
}

ncclResult_t ncclRedOpCreatePreMulSum(int* op, void* scalar, int dt, int residence, ncclComm_t comm) {
  return hetcclRedOpCreatePreMulSum(reinterpret_cast<hetcclRedOp_t*>(op), scalar, static_cast<hetcclDataType_t>(dt),
                                    static_cast<hetcclScalarResidence_t>(residence), comm);
}
ncclResult_t ncclRedOpDestroy(int op, ncclComm_t comm) {
  return hetcclRedOpDestroy(static_cast<hetcclRedOp_t>(op), comm);
}

#define DT(x) static_cast<hetcclDataType_t>(x)
#define OP(x) static_cast<hetcclRedOp_t>(x)

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int dt, int op, ncclComm_t c, void* st) {
  return hetcclAllReduce(s, r, n, DT(dt), OP(op), c, st);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return hetcclBroadcast(s, r, n, DT(dt), root, c, st);
}
ncclResult_t ncclBcast(void* buf, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return hetcclBroadcast(buf, buf, n, DT(dt), root, c, st);
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, int dt, int op, int root, ncclComm_t c, void* st) {
  return hetcclReduce(s, r, n, DT(dt), OP(op), root, c, st);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {
  return hetcclAllGather(s, r, n, DT(dt), c, st);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int dt, int op, ncclComm_t c, void* st) {
  return hetcclReduceScatter(s, r, n, DT(dt), OP(op), c, st);
}
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {
  return hetcclAlltoAll(s, r, n, DT(dt), c, st);
}
ncclResult_t ncclAllToAll(const void* s, void* r, size_t n, int dt, ncclComm_t c, void* st) {  // RCCL's spelling
  return hetcclAlltoAll(s, r, n, DT(dt), c, st);
}
ncclResult_t ncclGather(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return hetcclGather(s, r, n, DT(dt), root, c, st);
}
ncclResult_t ncclScatter(const void* s, void* r, size_t n, int dt, int root, ncclComm_t c, void* st) {
  return hetcclScatter(s, r, n, DT(dt), root, c, st);
}
ncclResult_t ncclSend(const void* s, size_t n, int dt, int peer, ncclComm_t c, void* st) {
  return hetcclSend(s, n, DT(dt), peer, c, st);
}
ncclResult_t ncclRecv(void* r, size_t n, int dt, int peer, ncclComm_t c, void* st) {
  return hetcclRecv(r, n, DT(dt), peer, c, st);
}
ncclResult_t ncclGroupStart(void) { return hetcclGroupStart(); }
ncclResult_t ncclGroupEnd(void) { return hetcclGroupEnd(); }

}  // extern "C"
