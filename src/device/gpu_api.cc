// Loading the CUDA or HIP runtime into a GpuApi table (dlopen, never linked).
#include "device/gpu_api.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/settings.h"
#include "device/lib_dir.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

struct Flavor {
  StringSetting setting;                     // the override variable
  const char* var;                           // its name
  const char* runtimeName;                   // "CUDA", for messages
  std::vector<const char*> libs;             // tried in order
  std::map<std::string, std::string> names;  // table field -> symbol
};

const Flavor& flavor(const std::string& kind) {
  static const Flavor cuda{settings::kCudaLib,
                           settings::kCudaLib.name,
                           "CUDA",
                           {"libcudart.so.13", "libcudart.so.12", "libcudart.so", "/usr/local/cuda/lib64/libcudart.so"},
                           {{"GetDeviceCount", "cudaGetDeviceCount"},
                            {"GetDevice", "cudaGetDevice"},
                            {"SetDevice", "cudaSetDevice"},
                            {"Malloc", "cudaMalloc"},
                            {"Free", "cudaFree"},
                            {"HostAlloc", "cudaHostAlloc"},
                            {"FreeHost", "cudaFreeHost"},
                            {"HostGetDevicePointer", "cudaHostGetDevicePointer"},
                            {"MemcpyAsync", "cudaMemcpyAsync"},
                            {"StreamCreateWithFlags", "cudaStreamCreateWithFlags"},
                            {"StreamDestroy", "cudaStreamDestroy"},
                            {"StreamSynchronize", "cudaStreamSynchronize"},
                            {"EventCreateWithFlags", "cudaEventCreateWithFlags"},
                            {"EventDestroy", "cudaEventDestroy"},
                            {"EventRecord", "cudaEventRecord"},
                            {"EventQuery", "cudaEventQuery"},
                            {"StreamWaitEvent", "cudaStreamWaitEvent"},
                            {"PointerGetAttributes", "cudaPointerGetAttributes"},
                            {"LaunchHostFunc", "cudaLaunchHostFunc"},
                            {"GetLastError", "cudaGetLastError"},
                            {"GetErrorString", "cudaGetErrorString"},
                            {"RuntimeGetVersion", "cudaRuntimeGetVersion"},
                            {"HostRegister", "cudaHostRegister"},
                            {"HostUnregister", "cudaHostUnregister"}}};
  static const Flavor hip{settings::kHipLib,
                          settings::kHipLib.name,
                          "HIP",
                          {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so", "/opt/rocm/lib/libamdhip64.so"},
                          {{"GetDeviceCount", "hipGetDeviceCount"},
                           {"GetDevice", "hipGetDevice"},
                           {"SetDevice", "hipSetDevice"},
                           {"Malloc", "hipMalloc"},
                           {"Free", "hipFree"},
                           {"HostAlloc", "hipHostMalloc"},
                           {"FreeHost", "hipHostFree"},
                           {"HostGetDevicePointer", "hipHostGetDevicePointer"},
                           {"MemcpyAsync", "hipMemcpyAsync"},
                           {"StreamCreateWithFlags", "hipStreamCreateWithFlags"},
                           {"StreamDestroy", "hipStreamDestroy"},
                           {"StreamSynchronize", "hipStreamSynchronize"},
                           {"EventCreateWithFlags", "hipEventCreateWithFlags"},
                           {"EventDestroy", "hipEventDestroy"},
                           {"EventRecord", "hipEventRecord"},
                           {"EventQuery", "hipEventQuery"},
                           {"StreamWaitEvent", "hipStreamWaitEvent"},
                           {"PointerGetAttributes", "hipPointerGetAttributes"},
                           {"LaunchHostFunc", "hipLaunchHostFunc"},
                           {"GetLastError", "hipGetLastError"},
                           {"GetErrorString", "hipGetErrorString"},
                           {"RuntimeGetVersion", "hipRuntimeGetVersion"},
                           {"HostRegister", "hipHostRegister"},
                           {"HostUnregister", "hipHostUnregister"}}};
  // The emulated GPU (src/emu): the CUDA runtime's shape under emu* names.
  static const Flavor emu{settings::kEmuLib,
                          settings::kEmuLib.name,
                          "emulated GPU",
                          {"libhetccl-emu.so"},
                          {{"GetDeviceCount", "emuGetDeviceCount"},
                           {"GetDevice", "emuGetDevice"},
                           {"SetDevice", "emuSetDevice"},
                           {"Malloc", "emuMalloc"},
                           {"Free", "emuFree"},
                           {"HostAlloc", "emuHostAlloc"},
                           {"FreeHost", "emuFreeHost"},
                           {"HostGetDevicePointer", "emuHostGetDevicePointer"},
                           {"MemcpyAsync", "emuMemcpyAsync"},
                           {"StreamCreateWithFlags", "emuStreamCreateWithFlags"},
                           {"StreamDestroy", "emuStreamDestroy"},
                           {"StreamSynchronize", "emuStreamSynchronize"},
                           {"EventCreateWithFlags", "emuEventCreateWithFlags"},
                           {"EventDestroy", "emuEventDestroy"},
                           {"EventRecord", "emuEventRecord"},
                           {"EventQuery", "emuEventQuery"},
                           {"StreamWaitEvent", "emuStreamWaitEvent"},
                           {"PointerGetAttributes", "emuPointerGetAttributes"},
                           {"LaunchHostFunc", "emuLaunchHostFunc"},
                           {"GetLastError", "emuGetLastError"},
                           {"GetErrorString", "emuGetErrorString"},
                           {"RuntimeGetVersion", "emuRuntimeGetVersion"},
                           {"HostRegister", "emuHostRegister"},
                           {"HostUnregister", "emuHostUnregister"}}};
  if (kind == "cuda") return cuda;
  if (kind == "hip") return hip;
  if (kind == "emu") return emu;
  throwError(hetcclInvalidArgument, "no GPU runtime of kind '" + kind + "' (known: cuda, hip, emu)");
}

template <typename F>
void bind(void* lib, const Flavor& f, const std::string& field, F*& out, const std::string& path) {
  const std::string& sym = f.names.at(field);
  out = reinterpret_cast<F*>(dlsym(lib, sym.c_str()));
  if (!out)
    throwError(hetcclSystemError, path + " has no symbol " + sym + ": it is not a usable " + f.runtimeName +
                                      " runtime (set " + f.var + " to the right library)");
}

std::unique_ptr<GpuApi> fill(void* lib, const std::string& kind, const std::string& path) {
  const Flavor& f = flavor(kind);
  auto api = std::make_unique<GpuApi>();
  api->kind = kind;
  api->path = path;
  bind(lib, f, "GetDeviceCount", api->getDeviceCount, path);
  bind(lib, f, "GetDevice", api->getDevice, path);
  bind(lib, f, "SetDevice", api->setDevice, path);
  bind(lib, f, "Malloc", api->malloc, path);
  bind(lib, f, "Free", api->free, path);
  bind(lib, f, "HostAlloc", api->hostAlloc, path);
  bind(lib, f, "FreeHost", api->freeHost, path);
  bind(lib, f, "HostGetDevicePointer", api->hostGetDevicePointer, path);
  bind(lib, f, "MemcpyAsync", api->memcpyAsync, path);
  bind(lib, f, "StreamCreateWithFlags", api->streamCreateWithFlags, path);
  bind(lib, f, "StreamDestroy", api->streamDestroy, path);
  bind(lib, f, "StreamSynchronize", api->streamSynchronize, path);
  bind(lib, f, "EventCreateWithFlags", api->eventCreateWithFlags, path);
  bind(lib, f, "EventDestroy", api->eventDestroy, path);
  bind(lib, f, "EventRecord", api->eventRecord, path);
  bind(lib, f, "EventQuery", api->eventQuery, path);
  bind(lib, f, "StreamWaitEvent", api->streamWaitEvent, path);
  bind(lib, f, "PointerGetAttributes", api->pointerGetAttributes, path);
  bind(lib, f, "LaunchHostFunc", api->launchHostFunc, path);
  bind(lib, f, "GetLastError", api->getLastError, path);
  bind(lib, f, "GetErrorString", api->getErrorString, path);
  bind(lib, f, "HostRegister", api->hostRegister, path);
  bind(lib, f, "HostUnregister", api->hostUnregister, path);
  GpuApi::Status (*runtimeVersion)(int*) = nullptr;
  bind(lib, f, "RuntimeGetVersion", runtimeVersion, path);
  if (runtimeVersion(&api->runtimeVersion) != 0) api->runtimeVersion = 0;
  {
    const std::string pre = kind == "hip" ? "hip" : kind == "emu" ? "emu" : "cuda";
    api->eventElapsedTime =
        reinterpret_cast<decltype(api->eventElapsedTime)>(dlsym(lib, (pre + "EventElapsedTime").c_str()));
    api->streamIsCapturing =
        reinterpret_cast<decltype(api->streamIsCapturing)>(dlsym(lib, (pre + "StreamIsCapturing").c_str()));
    api->threadExchangeStreamCaptureMode = reinterpret_cast<decltype(api->threadExchangeStreamCaptureMode)>(
        dlsym(lib, (pre + "ThreadExchangeStreamCaptureMode").c_str()));
    api->streamGetId = reinterpret_cast<decltype(api->streamGetId)>(dlsym(lib, (pre + "StreamGetId").c_str()));
    api->streamCreateWithPriority = reinterpret_cast<decltype(api->streamCreateWithPriority)>(
        dlsym(lib, (pre + "StreamCreateWithPriority").c_str()));
    api->deviceGetStreamPriorityRange = reinterpret_cast<decltype(api->deviceGetStreamPriorityRange)>(
        dlsym(lib, (pre + "DeviceGetStreamPriorityRange").c_str()));
    api->streamGetPriority =
        reinterpret_cast<decltype(api->streamGetPriority)>(dlsym(lib, (pre + "StreamGetPriority").c_str()));
    if (kind == "cuda" && api->runtimeVersion >= 13000)
      api->streamGetCaptureInfo7 =
          reinterpret_cast<decltype(api->streamGetCaptureInfo7)>(dlsym(lib, "cudaStreamGetCaptureInfo"));
    else
      api->streamGetCaptureInfo6 = reinterpret_cast<decltype(api->streamGetCaptureInfo6)>(
          dlsym(lib, (pre + (kind == "emu" ? "StreamGetCaptureInfo" : "StreamGetCaptureInfo_v2")).c_str()));
    api->userObjectCreate =
        reinterpret_cast<decltype(api->userObjectCreate)>(dlsym(lib, (pre + "UserObjectCreate").c_str()));
    api->userObjectRelease =
        reinterpret_cast<decltype(api->userObjectRelease)>(dlsym(lib, (pre + "UserObjectRelease").c_str()));
    api->graphRetainUserObject =
        reinterpret_cast<decltype(api->graphRetainUserObject)>(dlsym(lib, (pre + "GraphRetainUserObject").c_str()));
  }
  if (kind != "emu") {
    const std::string pre = kind == "hip" ? "hip" : "cuda";
    api->deviceGetPCIBusId =
        reinterpret_cast<decltype(api->deviceGetPCIBusId)>(dlsym(lib, (pre + "DeviceGetPCIBusId").c_str()));
    if (kind == "cuda")
      api->deviceGetAttribute =
          reinterpret_cast<decltype(api->deviceGetAttribute)>(dlsym(lib, "cudaDeviceGetAttribute"));
  }
  if (kind == "hip") {
    api->hipLegacyMemTypes = api->runtimeVersion < 60000000;
    api->hipWaitValue64 = reinterpret_cast<decltype(api->hipWaitValue64)>(dlsym(lib, "hipStreamWaitValue64"));
    api->hipWriteValue64 = reinterpret_cast<decltype(api->hipWriteValue64)>(dlsym(lib, "hipStreamWriteValue64"));
  } else if (kind == "emu") {
    api->cuWaitValue64 = reinterpret_cast<decltype(api->cuWaitValue64)>(dlsym(lib, "emuStreamWaitValue64"));
    api->cuWriteValue64 = reinterpret_cast<decltype(api->cuWriteValue64)>(dlsym(lib, "emuStreamWriteValue64"));
  } else {
    // Stream memory operations live in the driver API; the runtime's streams
    // are driver streams.
    if (void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
      void* fn = dlsym(drv, "cuStreamWaitValue64_v2");
      if (!fn) fn = dlsym(drv, "cuStreamWaitValue64");
      api->cuWaitValue64 = reinterpret_cast<decltype(api->cuWaitValue64)>(fn);
      fn = dlsym(drv, "cuStreamWriteValue64_v2");
      if (!fn) fn = dlsym(drv, "cuStreamWriteValue64");
      api->cuWriteValue64 = reinterpret_cast<decltype(api->cuWriteValue64)>(fn);
    }
  }
  return api;
}

std::mutex gMu;
std::map<std::string, std::unique_ptr<GpuApi>>& cache() {
  static auto* m = new std::map<std::string, std::unique_ptr<GpuApi>>;  // never unloaded
  return *m;
}

}  // namespace

void GpuApi::check(Status s, const char* call) const {
  if (s == 0) return;
  const char* text = getErrorString ? getErrorString(s) : "unknown error";
  throwError(hetcclUnhandledDeviceError,
             kind + " runtime: " + call + " failed: " + (text ? text : "?") + " (error " + std::to_string(s) + ")");
}

bool GpuApi::captureGraph(void* stream, void** graph) const {
  int status = 0;
  unsigned long long id = 0;
  *graph = nullptr;
  Status r = streamGetCaptureInfo7   ? streamGetCaptureInfo7(stream, &status, &id, graph, nullptr, nullptr, nullptr)
             : streamGetCaptureInfo6 ? streamGetCaptureInfo6(stream, &status, &id, graph, nullptr, nullptr)
                                     : -1;
  if (r != 0) {
    if (r != -1) getLastError();
    return false;
  }
  return status == 1 && *graph;
}

const GpuApi& loadGpuApi(const std::string& kind) {
  std::lock_guard<std::mutex> g(gMu);
  auto it = cache().find(kind);
  if (it != cache().end()) return *it->second;
  const Flavor& f = flavor(kind);
  std::string given = f.setting.get();
  std::vector<std::string> tries;
  if (!given.empty())
    tries.push_back(given);
  else
    for (const char* l : f.libs) {
      // hetccl's own runtimes (emu) sit beside libhetccl.so.
      if (kind == "emu")
        for (const std::string& d : pluginDirs()) tries.push_back(d + "/" + l);
      tries.push_back(l);
    }
  std::string errors;
  for (const std::string& path : tries) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      errors += "\n  " + path + ": " + (e ? e : "not found");
      continue;
    }
    auto api = fill(lib, kind, path);
    LOG_INFO(kDevice, "%s runtime %s (version %d), stream wait-value %s", kind.c_str(), path.c_str(),
             api->runtimeVersion, (api->cuWaitValue64 || api->hipWaitValue64) ? "available" : "unavailable");
    const GpuApi& ref = *api;
    cache()[kind] = std::move(api);
    return ref;
  }
  throwError(hetcclSystemError, "cannot load the " + kind + " runtime (device kind '" + kind + "' needs it; set " +
                                    f.var + " to its path):" + errors);
}

std::unique_ptr<GpuApi> openGpuApi(const std::string& kind, const std::string& path) {
  const Flavor& f = flavor(kind);
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    throwError(hetcclSystemError, "cannot load the " + kind + " runtime from " + path + " (" + (e ? e : "not found") +
                                      "; set " + f.var + " to its path)");
  }
  return fill(lib, kind, path);
}

const GpuApi* loadedGpuApi(const std::string& kind) {
  {
    std::lock_guard<std::mutex> g(gMu);
    auto it = cache().find(kind);
    if (it != cache().end()) return it->second.get();
  }
  for (const char* l : flavor(kind).libs) {
    void* lib = dlopen(l, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib) continue;
    dlclose(lib);
    try {
      return &loadGpuApi(kind);
    } catch (const Error&) {
      return nullptr;
    }
  }
  return nullptr;
}

}  // namespace hetccl
