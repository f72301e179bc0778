// Loading the device reduction kernels plugin (dlopen; never linked).
#include "device/kernels_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "core/settings.h"
#include "device/lib_dir.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

std::mutex gMu;
// key: kind + '\n' + HETCCL_KERNELS_LIB; value: the table, or null when absent.
std::map<std::string, const hetcclKernelsApi_t*>& cache() {
  static auto* m = new std::map<std::string, const hetcclKernelsApi_t*>;  // plugins are never unloaded
  return *m;
}

bool fileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// dlopen + check; throws on a file that is there but no valid plugin.
const hetcclKernelsApi_t* open(const std::string& path, const std::string& kind, const std::string& how) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    throwError(hetcclSystemError,
               "cannot load the " + kind + " kernels plugin " + path + " (" + how + "): " + (e ? e : "dlopen failed"));
  }
  auto get = reinterpret_cast<hetcclKernelsGetApi_t>(dlsym(lib, HETCCL_KERNELS_GET_API_SYMBOL));
  if (!get) {
    dlclose(lib);
    throwError(hetcclInvalidUsage, path + " (" + how + ") is not a hetccl kernels plugin: it has no " +
                                       HETCCL_KERNELS_GET_API_SYMBOL + " symbol");
  }
  const hetcclKernelsApi_t* api = get(HETCCL_KERNELS_API_VERSION);
  if (!api || api->version != HETCCL_KERNELS_API_VERSION) {
    std::string has = api ? std::to_string(api->version) : "none";
    dlclose(lib);
    throwError(hetcclInvalidUsage, "the kernels plugin " + path + " (" + how + ") does not implement ABI version " +
                                       std::to_string(HETCCL_KERNELS_API_VERSION) + " (it returned " + has +
                                       "); rebuild it with this hetccl");
  }
  if (!api->kind || kind != api->kind || !api->reduce || !api->scale || !api->divide || !api->lastError ||
      !api->preload) {
    std::string has = api->kind ? api->kind : "(null)";
    dlclose(lib);
    throwError(hetcclInvalidUsage, "the kernels plugin " + path + " (" + how + ") is for device kind '" + has +
                                       "', not '" + kind + "', or has empty entries");
  }
  LOG_INFO(kDevice, "%s kernels plugin %s (%s), ABI version %d", kind.c_str(), path.c_str(), how.c_str(), api->version);
  return api;
}

const hetcclKernelsApi_t* find(const std::string& kind, const std::string& given) {
  if (!given.empty()) return open(given, kind, "HETCCL_KERNELS_LIB");
  std::string name = kernelsLibName(kind);
  for (const std::string& dir : pluginDirs())
    if (fileExists(dir + "/" + name)) return open(dir + "/" + name, kind, "beside libhetccl");
  // The loader's search path (LD_LIBRARY_PATH, rpath, ld.so.cache): absent
  // is no error here, only a file that is found but fails to load.
  if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    dlclose(lib);  // open() takes its own reference
    return open(name, kind, "loader search path");
  }
  const char* e = dlerror();
  std::string why = e ? e : "not found";
  // A plugin the loader finds but cannot load (a missing dependency, a
  // wrong architecture) reports a different error than a missing file.
  if (why.find(name + ": cannot open shared object file") == std::string::npos) {
    throwError(hetcclSystemError, "cannot load the " + kind + " kernels plugin " + name + ": " + why);
  }
  std::string dirs;
  for (const std::string& d : pluginDirs()) dirs += (dirs.empty() ? "" : ", ") + d;
  LOG_INFO(kDevice,
           "no %s kernels plugin: %s is neither in %s nor on the loader's search path (set "
           "HETCCL_KERNELS_LIB to its path); device reductions are unavailable",
           kind.c_str(), name.c_str(), dirs.empty() ? "(unknown directory)" : dirs.c_str());
  return nullptr;
}

}  // namespace

std::string kernelsLibName(const std::string& kind) { return "libhetccl-" + kind + "-kernels.so"; }

const hetcclKernelsApi_t* loadKernels(const std::string& kind) {
  if (kind != "cuda" && kind != "hip" && kind != "emu")
    throwError(hetcclInvalidArgument, "no kernels plugin for device kind '" + kind + "' (known: cuda, hip, emu)");
  std::string given = settings::kKernelsLib.get();
  std::string key = kind + '\n' + given;
  std::lock_guard<std::mutex> g(gMu);
  auto it = cache().find(key);
  if (it != cache().end()) return it->second;
  const hetcclKernelsApi_t* api = find(kind, given);  // throws: nothing cached, the next call tries again
  cache()[key] = api;
  return api;
}

void preloadKernels(const hetcclKernelsApi_t& api) {
  if (api.preload() != HETCCL_KERNELS_SUCCESS)
    throwError(hetcclUnhandledDeviceError,
               std::string("the ") + api.kind + " kernels plugin could not load its kernels: " + api.lastError());
}

}  // namespace hetccl
