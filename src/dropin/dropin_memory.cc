// The drop-in's memory entry points: allocation, registration, windows,
// device communicators and one-sided signals. hetccl has no part in these:
// in a one-group communicator they are the vendor library's own; across
// groups registration is accepted without effect (it only lets NCCL skip
// copies) and the rest is refused with a message.
#include <cstdlib>
#include <mutex>
#include <set>

#include "device/gpu_api.h"
#include "dropin/dropin.h"
#include "core/log.h"

using namespace hetccl;
using namespace hetccl::dropin;

namespace {

ncclResult_t code(hetcclResult_t r) { return static_cast<ncclResult_t>(r); }

// Registration handles handed out by communicators of several groups (their
// calls stage the data, so there is nothing to register); told apart from
// the vendor library's own handles on deregistration.
std::mutex& markersMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<void*>& markers() {
  static auto* s = new std::set<void*>;
  return *s;
}

// The vendor library of a one-group communicator for a call hetccl cannot
// serve otherwise; refuses where there is none or it lacks the function.
template <class Fn>
Vendor requireVendor(hetcclComm* comm, Fn nccl::NcclApi::*fn, const char* what) {
  Vendor v = vendorOf(comm, true);
  if (!v) refuse(what, "across groups (a communicator of several groups has no single NCCL communicator)");
  if (!(v.api->*fn))
    refuse(what, "here: the vendor library (" + v.api->path + ", version " + nccl::ncclVersionString(v.api->version) +
                     ") does not have it");
  return v;
}

}  // namespace

extern "C" {

// ncclMemAlloc memory must suit the vendor library's registrations: its own
// allocator where it loads, else the device runtime's (or plain memory on
// host ranks). ncclMemFree takes it back the same way.
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return code(guard(nullptr, "ncclMemAlloc", [&] {
    HETCCL_CHECK_ARG(ptr, "ptr is NULL");
    *ptr = nullptr;
    const std::string kind = deviceKind();
    if (kind == "host") {
      *ptr = aligned_alloc(4096, (size + 4095) & ~size_t{4095});
      if (!*ptr && size) throwError(hetcclSystemError, "ncclMemAlloc: out of memory");
      return;
    }
    if (const nccl::NcclApi* v = vendorLibrary(); v && v->memAlloc) {
      Vendor vv{v, nullptr};
      return vendorCheck(vv, v->memAlloc(ptr, size), "ncclMemAlloc");
    }
    const GpuApi& g = loadGpuApi(kind);
    g.check(g.malloc(ptr, size), "malloc");
  }));
}

ncclResult_t ncclMemFree(void* ptr) {
  return code(guard(nullptr, "ncclMemFree", [&] {
    if (!ptr) return;
    const std::string kind = deviceKind();
    if (kind == "host") return free(ptr);
    if (const nccl::NcclApi* v = vendorLibrary(); v && v->memFree) {
      Vendor vv{v, nullptr};
      return vendorCheck(vv, v->memFree(ptr), "ncclMemFree");
    }
    const GpuApi& g = loadGpuApi(kind);
    g.check(g.free(ptr), "free");
  }));
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return code(guard(comm, "ncclCommRegister", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(handle, "handle is NULL");
    if (Vendor v = vendorOf(comm, true); v && v.api->commRegister)
      return vendorCheck(v, v.api->commRegister(v.comm, buff, size, handle), "ncclCommRegister");
    auto* marker = new char;
    {
      std::lock_guard<std::mutex> g(markersMu());
      markers().insert(marker);
    }
    *handle = marker;
    LOG_INFO(kInit, "ncclCommRegister(%p, %zu): this communicator stages its data; accepted without effect", buff,
             size);
  }));
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return code(guard(comm, "ncclCommDeregister", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(handle, "handle is NULL");
    {
      std::lock_guard<std::mutex> g(markersMu());
      if (markers().erase(handle)) {
        delete static_cast<char*>(handle);
        return;
      }
    }
    Vendor v = vendorOf(comm, true);
    if (!v || !v.api->commDeregister)
      throwError(hetcclInvalidArgument, "handle was not returned by ncclCommRegister on this communicator");
    vendorCheck(v, v.api->commDeregister(v.comm, handle), "ncclCommDeregister");
  }));
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, void** win, int winFlags) {
  return code(guard(comm, "ncclCommWindowRegister", [&] {
    CommRef ref(comm);
    HETCCL_CHECK_ARG(win, "win is NULL");
    Vendor v =
        requireVendor(comm, &nccl::NcclApi::commWindowRegister, "symmetric memory windows (ncclCommWindowRegister)");
    vendorCheck(v, v.api->commWindowRegister(v.comm, buff, size, win, winFlags), "ncclCommWindowRegister");
  }));
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, void* win) {
  return code(guard(comm, "ncclCommWindowDeregister", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::commWindowDeregister,
                             "symmetric memory windows (ncclCommWindowDeregister)");
    vendorCheck(v, v.api->commWindowDeregister(v.comm, win), "ncclCommWindowDeregister");
  }));
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, void* win, void** userPtr) {
  return code(guard(comm, "ncclWinGetUserPtr", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::winGetUserPtr, "symmetric memory windows (ncclWinGetUserPtr)");
    vendorCheck(v, v.api->winGetUserPtr(v.comm, win, userPtr), "ncclWinGetUserPtr");
  }));
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm) {
  return code(guard(comm, "ncclDevCommCreate", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::devCommCreate, "device-side communicators (ncclDevCommCreate)");
    vendorCheck(v, v.api->devCommCreate(v.comm, reqs, outDevComm), "ncclDevCommCreate");
  }));
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm) {
  return code(guard(comm, "ncclDevCommDestroy", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::devCommDestroy, "device-side communicators (ncclDevCommDestroy)");
    vendorCheck(v, v.api->devCommDestroy(v.comm, devComm), "ncclDevCommDestroy");
  }));
}

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, int datatype, int peer, void* peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned flags, ncclComm_t comm, void* stream) {
  return code(guard(comm, "ncclPutSignal", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::putSignal, "one-sided puts (ncclPutSignal)");
    vendorCheck(v,
                v.api->putSignal(localbuff, count, static_cast<nccl::ncclDataType_t>(datatype), peer, peerWin,
                                 peerWinOffset, sigIdx, ctx, flags, v.comm, stream),
                "ncclPutSignal");
  }));
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned flags, ncclComm_t comm, void* stream) {
  return code(guard(comm, "ncclSignal", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::signal, "one-sided signals (ncclSignal)");
    vendorCheck(v, v.api->signal(peer, sigIdx, ctx, flags, v.comm, stream), "ncclSignal");
  }));
}

ncclResult_t ncclWaitSignal(int nDesc, void* signalDescs, ncclComm_t comm, void* stream) {
  return code(guard(comm, "ncclWaitSignal", [&] {
    CommRef ref(comm);
    Vendor v = requireVendor(comm, &nccl::NcclApi::waitSignal, "one-sided signals (ncclWaitSignal)");
    vendorCheck(v, v.api->waitSignal(nDesc, signalDescs, v.comm, stream), "ncclWaitSignal");
  }));
}

}  // extern "C"
