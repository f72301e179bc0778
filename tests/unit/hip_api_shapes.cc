// Compile-only: the HIP runtime functions device/gpu_api.cc binds by name
// for calls captured into graphs have the shapes of its table (checked
// against Debian's HIP headers, ROCm 5.2, which lack the user objects of
// ROCm 5.3: hipUserObjectCreate, hipUserObjectRelease,
// hipGraphRetainUserObject, so those are not checked here). Handles are
// pointers and enums int-sized in the table.
#include <hip/hip_runtime_api.h>

#include <type_traits>

static_assert(sizeof(hipStreamCaptureStatus) == sizeof(int) && sizeof(hipStreamCaptureMode) == sizeof(int));
static_assert(std::is_pointer_v<hipStream_t> && std::is_pointer_v<hipGraph_t> && std::is_pointer_v<hipGraphNode_t>);
// GpuApi::streamGetCaptureInfo6: (stream, int* status, unsigned long long* id, void** graph, const void** deps,
// size_t* numDeps).
static_assert(std::is_same_v<decltype(&hipStreamGetCaptureInfo_v2),
                             hipError_t (*)(hipStream_t, hipStreamCaptureStatus*, unsigned long long*, hipGraph_t*,
                                            const hipGraphNode_t**, size_t*)>);
// GpuApi::launchHostFunc: (stream, void (*)(void*), void*).
static_assert(std::is_same_v<decltype(&hipLaunchHostFunc), hipError_t (*)(hipStream_t, hipHostFn_t, void*)>);
static_assert(std::is_same_v<hipHostFn_t, void (*)(void*)>);
// GpuApi::streamIsCapturing and threadExchangeStreamCaptureMode.
static_assert(std::is_same_v<decltype(&hipStreamIsCapturing), hipError_t (*)(hipStream_t, hipStreamCaptureStatus*)>);
static_assert(std::is_same_v<decltype(&hipThreadExchangeStreamCaptureMode), hipError_t (*)(hipStreamCaptureMode*)>);
static_assert(sizeof(hipError_t) == sizeof(int));
