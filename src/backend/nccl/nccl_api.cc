// Loads an NCCL-ABI library (NCCL, RCCL) with dlopen and fills its function
// table; see nccl_api.h.
#include "backend/nccl/nccl_api.h"

#include <dlfcn.h>
#include <link.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/nccl/self_bind.h"
#include "core/settings.h"
#include "device/lib_dir.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl::nccl {
namespace {

struct Flavor {
  const char* lib;        // "NCCL"
  StringSetting setting;  // HETCCL_NCCL_LIB
  const char* envVar;     // its name
  const char* soname;     // what to point the variable at
};

Flavor flavorOf(const std::string& flavor) {
  if (flavor == "nccl") return {"NCCL", settings::kNcclLib, settings::kNcclLib.name, "libnccl.so.2"};
  if (flavor == "rccl") return {"RCCL", settings::kRcclLib, settings::kRcclLib.name, "librccl.so.1"};
  if (flavor == "emu")
    return {"emulated GPU's group", settings::kEmuNcclLib, settings::kEmuNcclLib.name, "libhetccl-emu-nccl.so"};
  throwError(hetcclInternalError, "NCCL-ABI flavor '" + flavor + "' is none of nccl, rccl, emu");
}

std::string setHint(const Flavor& f) { return std::string("set ") + f.envVar + " to the path of " + f.soname; }

std::string lastDlError() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Never destroyed: tables stay valid until the process ends.
std::mutex& cacheMutex() {
  static auto* m = new std::mutex;
  return *m;
}
// By flavor and path, as asked and as resolved (one table per loaded file).
std::map<std::string, const NcclApi*>& cache() {
  static auto* c = new std::map<std::string, const NcclApi*>;
  return *c;
}
std::string cacheKey(const std::string& path, const std::string& flavor) { return flavor + '\n' + path; }

template <class Fn>
void bind(void* handle, const char* name, Fn& fn, std::vector<std::string>* missing) {
  dlerror();
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!fn && missing) missing->push_back(name);
}

void bindOptional(void* h, NcclApi* api) {
  bind(h, "ncclCommInitRankConfig", api->commInitRankConfig, nullptr);
  bind(h, "ncclCommRegister", api->commRegister, nullptr);
  bind(h, "ncclCommDeregister", api->commDeregister, nullptr);
  bind(h, "ncclCommWindowRegister", api->commWindowRegister, nullptr);
  bind(h, "ncclCommWindowDeregister", api->commWindowDeregister, nullptr);
  bind(h, "ncclWinGetUserPtr", api->winGetUserPtr, nullptr);
  bind(h, "ncclMemAlloc", api->memAlloc, nullptr);
  bind(h, "ncclMemFree", api->memFree, nullptr);
  bind(h, "ncclDevCommCreate", api->devCommCreate, nullptr);
  bind(h, "ncclDevCommDestroy", api->devCommDestroy, nullptr);
  bind(h, "ncclCommQueryProperties", api->commQueryProperties, nullptr);
  bind(h, "ncclCommRevoke", api->commRevoke, nullptr);
  bind(h, "ncclCommSuspend", api->commSuspend, nullptr);
  bind(h, "ncclCommResume", api->commResume, nullptr);
  bind(h, "ncclCommMemStats", api->commMemStats, nullptr);
  bind(h, "ncclPutSignal", api->putSignal, nullptr);
  bind(h, "ncclSignal", api->signal, nullptr);
  bind(h, "ncclWaitSignal", api->waitSignal, nullptr);
  bind(h, "ncclResetDebugInit", api->resetDebugInit, nullptr);
  bind(h, "ncclParamBind", api->paramBind, nullptr);
  bind(h, "ncclParamGetI8", api->paramGetI8, nullptr);
  bind(h, "ncclParamGetI16", api->paramGetI16, nullptr);
  bind(h, "ncclParamGetI32", api->paramGetI32, nullptr);
  bind(h, "ncclParamGetI64", api->paramGetI64, nullptr);
  bind(h, "ncclParamGetU8", api->paramGetU8, nullptr);
  bind(h, "ncclParamGetU16", api->paramGetU16, nullptr);
  bind(h, "ncclParamGetU32", api->paramGetU32, nullptr);
  bind(h, "ncclParamGetU64", api->paramGetU64, nullptr);
  bind(h, "ncclParamGetStr", api->paramGetStr, nullptr);
  bind(h, "ncclParamGet", api->paramGet, nullptr);
  bind(h, "ncclParamGetParameter", api->paramGetParameter, nullptr);
  bind(h, "ncclParamGetAllParameterKeys", api->paramGetAllParameterKeys, nullptr);
  bind(h, "ncclParamDumpAll", api->paramDumpAll, nullptr);
  dlerror();
}

// Fills and checks the table of an opened library; throws if it is not a
// usable NCCL-ABI library. The handle stays open either way. `source`
// names where the path came from (" (HETCCL_NCCL_LIB)") or is empty.
std::unique_ptr<NcclApi> makeTable(void* h, const std::string& path, const std::string& flavor,
                                   const std::string& source) {
  const Flavor f = flavorOf(flavor);
  auto api = std::make_unique<NcclApi>();
  api->flavor = flavor;
  api->path = path;
  std::vector<std::string> missing;
  bind(h, "ncclGetVersion", api->getVersion, &missing);
  bind(h, "ncclGetUniqueId", api->getUniqueId, &missing);
  bind(h, "ncclCommInitRank", api->commInitRank, &missing);
  bind(h, "ncclCommDestroy", api->commDestroy, &missing);
  bind(h, "ncclCommAbort", api->commAbort, &missing);
  bind(h, "ncclCommGetAsyncError", api->commGetAsyncError, &missing);
  bind(h, "ncclGetErrorString", api->getErrorString, &missing);
  bind(h, "ncclAllReduce", api->allReduce, &missing);
  bind(h, "ncclReduceScatter", api->reduceScatter, &missing);
  bind(h, "ncclAllGather", api->allGather, &missing);
  bind(h, "ncclBroadcast", api->broadcast, &missing);
  bind(h, "ncclReduce", api->reduce, &missing);
  bind(h, "ncclSend", api->send, &missing);
  bind(h, "ncclRecv", api->recv, &missing);
  bind(h, "ncclGroupStart", api->groupStart, &missing);
  bind(h, "ncclGroupEnd", api->groupEnd, &missing);
  bind(h, "ncclRedOpCreatePreMulSum", api->redOpCreatePreMulSum, &missing);
  bind(h, "ncclRedOpDestroy", api->redOpDestroy, &missing);
  bind(h, "ncclGetLastError", api->getLastError, nullptr);
  bind(h, "ncclAlltoAll", api->allToAll, nullptr);
  if (!api->allToAll) bind(h, "ncclAllToAll", api->allToAll, nullptr);
  bindOptional(h, api.get());
  if (!missing.empty()) {
    std::string names;
    for (const auto& n : missing) names += (names.empty() ? "" : ", ") + n;
    throwError(hetcclInvalidUsage, "'" + path + "'" + source + " is not a usable " + f.lib + " library: it lacks " +
                                       names + "; " + setHint(f));
  }
  int v = 0;
  ncclResult_t r = api->getVersion(&v);
  if (r != ncclSuccess)
    throwError(hetcclSystemError, std::string(f.lib) + " at '" + api->path + "': ncclGetVersion failed (" +
                                      std::to_string(static_cast<int>(r)) + ")");
  if (v < kMinVersion)
    throwError(hetcclInvalidUsage, std::string(f.lib) + " at '" + api->path + "'" + source + " is version " +
                                       ncclVersionString(v) + " (code " + std::to_string(v) + "); hetccl needs " +
                                       f.lib + " " + ncclVersionString(kMinVersion) + " or newer (code >= " +
                                       std::to_string(kMinVersion) + "); set " + f.envVar + " to a newer " + f.soname);
  api->version = v;
  LOG_INFO(kBackend, "%s: loaded %s version %s (code %d)%s", flavor.c_str(), api->path.c_str(),
           ncclVersionString(v).c_str(), v, api->getLastError ? "" : ", without ncclGetLastError");
  return api;
}

// The vendor library's calls to its own API must reach its own definitions,
// not a preloaded NCCL-ABI library (hetccl's drop-in): see self_bind.h.
void bindToItself(void* h, const std::string& path) {
  RebindResult r = rebindOwnApi(h, {"nccl", "pnccl", "rccl"});
  if (!r.supported) {
    // Without the rewrite, a preloaded drop-in would receive the library's own calls.
    void* global = dlsym(RTLD_DEFAULT, "ncclCommGetAsyncError");
    void* own = dlsym(h, "ncclCommGetAsyncError");
    dlerror();
    if (global && own && global != own)
      throwError(hetcclInvalidUsage, "'" + path +
                                         "': another library's ncclCommGetAsyncError comes first in this "
                                         "process's symbol lookup, and hetccl cannot rebind the vendor library's own "
                                         "calls on this processor; do not preload an NCCL-ABI library here");
    return;
  }
  std::string names;
  for (const auto& n : r.rebound) names += (names.empty() ? "" : " ") + n;
  if (!r.rebound.empty())
    LOG_INFO(kBackend,
             "%s: %zu of its calls to its own API were bound to another library (a preloaded "
             "NCCL-ABI library) and now reach it again: %s",
             path.c_str(), r.rebound.size(), names.c_str());
}

// Under cacheMutex. Returns nullptr (and the dlerror text) when dlopen fails.
const NcclApi* openCached(const std::string& path, const std::string& flavor, const std::string& source,
                          std::string* err) {
  auto& c = cache();
  auto it = c.find(cacheKey(path, flavor));
  if (it != c.end()) return it->second;
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *err = lastDlError();
    return nullptr;
  }
  // hetccl's own NCCL-ABI drop-in answers to the same soname: never drive it.
  if (dlsym(h, "hetcclDropinFlavor")) {
    *err = "that is hetccl's own drop-in library, not the vendor's";
    return nullptr;
  }
  // The file the loader picked (a bare soname resolves to a full path).
  std::string resolved = path;
  link_map* lm = nullptr;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name) resolved = lm->l_name;
  it = c.find(cacheKey(resolved, flavor));
  if (it == c.end()) {
    bindToItself(h, resolved);
    const NcclApi* api = makeTable(h, resolved, flavor, source).release();  // never freed
    it = c.emplace(cacheKey(resolved, flavor), api).first;
  }
  c.emplace(cacheKey(path, flavor), it->second);
  return it->second;
}

const NcclApi& loadFromPath(const std::string& path, const std::string& flavor, const std::string& source) {
  const Flavor f = flavorOf(flavor);
  std::lock_guard<std::mutex> lock(cacheMutex());
  std::string err;
  if (const NcclApi* api = openCached(path, flavor, source, &err)) return *api;
  throwError(hetcclSystemError, std::string("cannot load the ") + f.lib + " library '" + path + "'" + source + ": " +
                                    err + "; " + setHint(f));
}

std::string dirOf(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? std::string() : file.substr(0, slash);
}

std::vector<std::string> defaultPaths(const std::string& flavor) {
  if (flavor == "rccl") return {"librccl.so.1", "librccl.so", "/opt/rocm/lib/librccl.so.1"};
  if (flavor == "emu") {
    std::vector<std::string> paths;
    for (const std::string& d : pluginDirs()) paths.push_back(d + "/libhetccl-emu-nccl.so");
    paths.push_back("libhetccl-emu-nccl.so");
    return paths;
  }
  std::vector<std::string> paths = {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
                                    "/usr/local/cuda/lib/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  // Beside a CUDA runtime the process has loaded already (a framework's
  // own), and in the NVIDIA wheels' layout (nvidia/cuda_runtime/lib beside
  // nvidia/nccl/lib), which is where PyTorch's NCCL lives when hetccl's
  // drop-in has taken the soname.
  if (void* sym = dlsym(RTLD_DEFAULT, "cudaGetDevice")) {
    Dl_info info{};
    if (dladdr(sym, &info) && info.dli_fname) {
      std::string dir = dirOf(info.dli_fname);
      if (!dir.empty()) {
        paths.push_back(dir + "/libnccl.so.2");
        paths.push_back(dir + "/../../nccl/lib/libnccl.so.2");
        paths.push_back(dir + "/../../nvidia/nccl/lib/libnccl.so.2");
      }
    }
  }
  dlerror();  // a failed dlsym above must not leak into a later message
  return paths;
}

}  // namespace

std::string ncclVersionString(int code) {
  int major, minor, patch;
  if (code >= 10000)
    major = code / 10000, minor = code % 10000 / 100, patch = code % 100;
  else
    major = code / 1000, minor = code % 1000 / 100, patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string ncclLibName(const std::string& flavor) { return flavorOf(flavor).lib; }

std::vector<std::string> ncclSearchPaths(const std::string& flavor) { return defaultPaths(flavor); }

const NcclApi& loadNcclApiFromPath(const std::string& path, const std::string& flavor) {
  return loadFromPath(path, flavor, "");
}

const NcclApi& loadNcclApi(const std::string& flavor) {
  const Flavor f = flavorOf(flavor);
  std::string explicitPath = f.setting.get();
  if (!explicitPath.empty()) return loadFromPath(explicitPath, flavor, std::string(" (") + f.envVar + ")");
  std::lock_guard<std::mutex> lock(cacheMutex());
  std::string tried;
  for (const auto& path : defaultPaths(flavor)) {
    std::string err;
    if (const NcclApi* api = openCached(path, flavor, "", &err)) return *api;
    tried += (tried.empty() ? "" : "; ") + path + " (" + err + ")";
  }
  throwError(hetcclSystemError, std::string("cannot find the ") + f.lib + " library: tried " + tried + "; " +
                                    setHint(f) + " (the " + flavor + " backend serves " +
                                    (flavor == "rccl"  ? "hip"
                                     : flavor == "emu" ? "emu"
                                                       : "cuda") +
                                    " ranks)");
}

}  // namespace hetccl::nccl
