// What the drop-in's entry points share (dropin.h).
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "backend/nccl/nccl_backend.h"
#include "core/settings.h"
#include "core/log.h"
#include "dropin/dropin.h"

namespace hetccl::dropin {

std::string deviceKind() { return settings::kDevice.isSet() ? settings::kDevice.get() : std::string(DROPIN_DEVICE); }

CommOptions optionsFrom(const void* ncclConfig) {
  CommOptions opts = readOptions(nullptr);
  opts.deviceKind = deviceKind();
  if (!ncclConfig) return opts;
  nccl::ncclConfigHead head{};
  memcpy(&head, ncclConfig, offsetof(nccl::ncclConfigHead, cgaClusterSize));
  if (head.magic != nccl::kConfigMagic)
    throwError(hetcclInvalidArgument,
               "config was not initialised with NCCL_CONFIG_INITIALIZER (magic " + std::to_string(head.magic) + ")");
  const size_t minSize = offsetof(nccl::ncclConfigHead, cgaClusterSize);
  if (head.size < minSize || head.size > (size_t{1} << 16))
    throwError(hetcclInvalidArgument, "config size " + std::to_string(head.size) +
                                          " is not the size of any ncclConfig_t (at least " + std::to_string(minSize) +
                                          " bytes)");
  // NCCL_CONFIG_UNDEF_INT (INT_MIN) leaves NCCL's default: blocking.
  if (head.blocking != INT_MIN) opts.blocking = head.blocking != 0;
  // A config of a newer NCCL is larger: the vendor library reads what it knows.
  const auto* bytes = static_cast<const uint8_t*>(ncclConfig);
  opts.vendorConfig.assign(bytes, bytes + head.size);
  return opts;
}

// Another NCCL-ABI library that a call by name would reach instead of this
// one: the process's global scope resolves ncclCommInitRank to it. Then some
// callers reach hetccl and others the vendor library, with handles that mean
// nothing to the other side.
//
// Another copy merely loaded is harmless: PyTorch's wheels load their own
// libnccl.so.2 by path even when hetccl's is preloaded (LD_PRELOAD), and the
// global scope still finds hetccl's first. Libraries loaded RTLD_LOCAL are
// reached only through their handles, by callers that chose them.
void refuseForeignNccl() {
  void* global = dlsym(RTLD_DEFAULT, "ncclCommInitRank");
  Dl_info self{}, where{};
  if (!global || !dladdr(global, &where) || !where.dli_fname) return;
  if (dladdr(reinterpret_cast<void*>(&refuseForeignNccl), &self) && self.dli_fbase == where.dli_fbase) return;
  // Another hetccl drop-in (the other flavour) drives the same communicators.
  if (void* h = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
    bool hetccl = dlsym(h, "hetcclDropinFlavor") != nullptr;
    dlclose(h);
    if (hetccl) return;
  }
  throwError(hetcclInvalidUsage, std::string("another NCCL library (") + where.dli_fname +
                                     ") comes before hetccl's " DROPIN_SONAME
                                     " in this process's symbol lookup, so calls could reach either. Preload "
                                     "hetccl's (LD_PRELOAD or hetccl-torch-run): hetccl drives the vendor "
                                     "library itself (HETCCL_NCCL_LIB / HETCCL_RCCL_LIB)");
}

const nccl::NcclApi* vendorLibrary() {
  static const nccl::NcclApi* api = [] {
    try {
      return &nccl::loadNcclApi(DROPIN_FLAVOR);
    } catch (const Error& e) {
      LOG_INFO(kInit, "drop-in: no vendor library: %s", e.what());
      return static_cast<const nccl::NcclApi*>(nullptr);
    }
  }();
  return api;
}

int dropinVersion() {
  const nccl::NcclApi* v = vendorLibrary();
  return v ? std::min(v->version, kServedVersion) : kServedVersion;
}

Vendor vendorOf(hetcclComm* c, bool oneGroup) {
  if (!c->ready() || (oneGroup && c->topo().ngroups() != 1)) return {};
  auto* be = dynamic_cast<NcclBackend*>(&c->groupBackend());
  if (!be) return {};
  Vendor v;
  v.api = &be->api();
  v.comm = be->vendorComm();
  return v;
}

void refuse(const std::string& what, const std::string& why) {
  throwError(hetcclInvalidUsage, what + " is not supported by hetccl " + why);
}

void vendorCheck(const Vendor& v, nccl::ncclResult_t r, const char* fn) {
  if (r == nccl::ncclSuccess || r == nccl::ncclInProgress) return;
  const char* text = v.api->getErrorString ? v.api->getErrorString(r) : nullptr;
  std::string msg = std::string(fn) + " in " + nccl::ncclLibName(v.api->flavor) +
                    " failed: " + (text ? text : "unknown error") + " (code " + std::to_string(static_cast<int>(r)) +
                    ")";
  if (v.api->getLastError) {
    const char* last = v.api->getLastError(v.comm);
    if (last && *last) msg += "; last error: " + std::string(last);
  }
  throwError(ncclToHetccl(r), msg);
}

}  // namespace hetccl::dropin
