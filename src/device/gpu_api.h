// The GPU runtime functions hetccl uses, as a table filled at run time from
// the CUDA runtime (libcudart) or the HIP runtime (libamdhip64). The two APIs
// agree on the shape of every call used here (int status, opaque stream and
// event handles, the same memcpy kind and flag values), so one table and one
// DeviceRuntime implementation serve both; only names and a few enum values
// differ. No vendor header is included: the same build runs where neither
// runtime exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hetccl {

struct GpuApi {
  std::string kind;  // "cuda" or "hip"
  std::string path;  // the library loaded
  int runtimeVersion = 0;
  bool hipLegacyMemTypes = false;  // HIP before 6.0 numbered memory types differently

  using Status = int;  // cudaError_t / hipError_t: 0 is success
  Status (*getDeviceCount)(int*) = nullptr;
  Status (*getDevice)(int*) = nullptr;
  Status (*setDevice)(int) = nullptr;
  Status (*malloc)(void**, size_t) = nullptr;
  Status (*free)(void*) = nullptr;
  Status (*hostAlloc)(void**, size_t, unsigned) = nullptr;
  Status (*freeHost)(void*) = nullptr;
  Status (*hostGetDevicePointer)(void**, void*, unsigned) = nullptr;
  Status (*memcpyAsync)(void*, const void*, size_t, int, void*) = nullptr;
  Status (*streamCreateWithFlags)(void**, unsigned) = nullptr;
  Status (*streamDestroy)(void*) = nullptr;
  Status (*streamSynchronize)(void*) = nullptr;
  Status (*eventCreateWithFlags)(void**, unsigned) = nullptr;
  Status (*eventDestroy)(void*) = nullptr;
  Status (*eventRecord)(void*, void*) = nullptr;
  Status (*eventQuery)(void*) = nullptr;
  Status (*streamWaitEvent)(void*, void*, unsigned) = nullptr;
  Status (*pointerGetAttributes)(void*, const void*) = nullptr;
  Status (*launchHostFunc)(void*, void (*)(void*), void*) = nullptr;
  Status (*getLastError)() = nullptr;
  const char* (*getErrorString)(Status) = nullptr;
  // Stream waits on a 64-bit host-written value: cuStreamWaitValue64 from the
  // CUDA driver (flags: 0 = greater or equal), hipStreamWaitValue64 (extra
  // mask argument) from HIP. Null where unavailable.
  int (*cuWaitValue64)(void*, uint64_t, uint64_t, unsigned) = nullptr;
  Status (*hipWaitValue64)(void*, void*, uint64_t, unsigned, uint64_t) = nullptr;
  // Stream stores of a 64-bit value (after the stream's earlier work, with a
  // memory barrier): cuStreamWriteValue64, hipStreamWriteValue64. Null where
  // unavailable.
  int (*cuWriteValue64)(void*, uint64_t, uint64_t, unsigned) = nullptr;
  Status (*hipWriteValue64)(void*, void*, uint64_t, unsigned) = nullptr;
  // Page-locks and maps memory that was allocated elsewhere (a shared
  // segment): cudaHostRegister / hipHostRegister and their inverse.
  Status (*hostRegister)(void*, size_t, unsigned) = nullptr;
  Status (*hostUnregister)(void*) = nullptr;
  // Optional (null where the runtime lacks them): the device's PCI address
  // (cudaDeviceGetPCIBusId / hipDeviceGetPCIBusId) and cudaDeviceGetAttribute,
  // for whether two ranks share one GPU and whether MPS shares its contexts.
  Status (*deviceGetPCIBusId)(char*, int, int) = nullptr;
  Status (*deviceGetAttribute)(int*, int, int) = nullptr;
  // Optional: milliseconds between two completed events made with timing
  // (cudaEventElapsedTime / hipEventElapsedTime / emuEventElapsedTime), for
  // the time of the device border's steps.
  Status (*eventElapsedTime)(float*, void*, void*) = nullptr;
  // Optional: stream capture (cudaStreamIsCapturing: 0 none, 1 active, 2
  // invalidated) and the calling thread's capture mode
  // (cudaThreadExchangeStreamCaptureMode: 0 global, 1 thread-local, 2
  // relaxed), and the HIP and emu twins.
  Status (*streamIsCapturing)(void*, int*) = nullptr;
  Status (*threadExchangeStreamCaptureMode)(int*) = nullptr;
  // Optional: a stream's id, unique for the process's life, where a handle
  // may come back for a stream created after the first was destroyed
  // (cudaStreamGetId, CUDA 12; hipStreamGetId in later ROCm; emu's twin).
  Status (*streamGetId)(void*, unsigned long long*) = nullptr;
  // Optional: streams of a priority (cudaStreamCreateWithPriority, lower
  // numbers first; hipStreamCreateWithPriority; emu's twins), the device's
  // range (least, greatest) and a stream's priority.
  Status (*streamCreateWithPriority)(void**, unsigned, int) = nullptr;
  Status (*deviceGetStreamPriorityRange)(int*, int*) = nullptr;
  Status (*streamGetPriority)(void*, int*) = nullptr;

  // Optional: what a call across groups captured into a graph needs. The
  // graph a stream is being captured into: cudaStreamGetCaptureInfo in
  // CUDA 13's form (7 arguments, edge data among them), else
  // cudaStreamGetCaptureInfo_v2 (CUDA 12), hipStreamGetCaptureInfo_v2 and
  // emu's, of 6. User objects, whose destructor runs once the last graph or
  // exec holding them goes (cudaUserObjectCreate, cudaUserObjectRelease,
  // cudaGraphRetainUserObject and the HIP and emu twins; HIP has them from
  // ROCm 5.3, Debian's 5.2 lacks them).
  Status (*streamGetCaptureInfo7)(void*, int*, unsigned long long*, void**, const void**, const void**,
                                  size_t*) = nullptr;
  Status (*streamGetCaptureInfo6)(void*, int*, unsigned long long*, void**, const void**, size_t*) = nullptr;
  Status (*userObjectCreate)(void**, void*, void (*)(void*), unsigned, unsigned) = nullptr;
  Status (*userObjectRelease)(void*, unsigned) = nullptr;
  Status (*graphRetainUserObject)(void*, void*, unsigned, unsigned) = nullptr;
  // The graph `stream` is being captured into, through whichever form of
  // the capture info is there; false where the stream is not capturing or
  // the runtime cannot say.
  bool captureGraph(void* stream, void** graph) const;

  static constexpr Status kNotReady = 600;                   // cudaErrorNotReady == hipErrorNotReady
  static constexpr int kMemcpyDefault = 4;                   // cudaMemcpyDefault == hipMemcpyDefault
  static constexpr unsigned kHostAllocPortableMapped = 0x3;  // Portable | Mapped (both APIs)
  static constexpr unsigned kStreamNonBlocking = 0x1;
  static constexpr unsigned kEventDisableTiming = 0x2;

  // Throws hetcclUnhandledDeviceError naming the call and the runtime's text.
  void check(Status s, const char* call) const;
};

// Loads the runtime of `kind` ("cuda" or "hip") once per process; throws a
// clear error naming the library tried and the variable that overrides it
// (HETCCL_CUDA_LIB, HETCCL_HIP_LIB) when it cannot.
const GpuApi& loadGpuApi(const std::string& kind);
// Uncached: loads `path` as the runtime of `kind` (tests; error paths).
std::unique_ptr<GpuApi> openGpuApi(const std::string& kind, const std::string& path);
// The runtime of `kind` only if the process has loaded it already (never
// loads anything); null otherwise. Lets host ranks recognise GPU pointers.
const GpuApi* loadedGpuApi(const std::string& kind);

}  // namespace hetccl
