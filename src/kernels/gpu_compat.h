// The few names that let reduce_kernels.cu compile as CUDA (nvcc), as HIP
// (hipcc -x hip) and as plain C++ for the emulated GPU (HETCCL_EMU_BUILD:
// a kernel is one "thread" run on the emu stream): the runtime header, the
// stream and error types, the calls the launcher makes (gpuLoadKernel: load a
// kernel into the current context without launching it), the launch itself,
// and HETCCL_DEV for the element code (src/elements/codecs.h).
#pragma once

#include <stdint.h>

#if defined(HETCCL_EMU_BUILD)
#include "emu/emu_runtime.h"
#define HETCCL_GPU_KIND "emu"
typedef emuStream_t gpuStream_t;
typedef emuError_t gpuError_t;
#define gpuSuccess emuSuccess
#define gpuGetLastError emuGetLastError
#define gpuGetErrorString emuGetErrorString
#define gpuGetDevice emuGetDevice
inline gpuError_t gpuDeviceGetAttribute(int* v, int, int) {
  *v = 1;  // one multiprocessor: one "thread" per launch
  return emuSuccess;
}
#define gpuDevAttrMultiProcessorCount 0
template <class K>
inline gpuError_t gpuLoadKernel(K kernel) {
  return emuLoadKernel(reinterpret_cast<const void*>(kernel));
}
#define __global__
#define __launch_bounds__(n)
struct EmuDim3 {
  unsigned x;
};
constexpr EmuDim3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
// The kernel runs whole on the stream's worker, as one thread of one block.
#define HETCCL_LAUNCH(kernel, blocks, threads, stream, ...) \
  emuLaunchKernel(reinterpret_cast<const void*>(kernel), stream, [=] { kernel(__VA_ARGS__); })
inline void __syncthreads() {}
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#elif defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define HETCCL_GPU_KIND "hip"
typedef hipStream_t gpuStream_t;
typedef hipError_t gpuError_t;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuGetDevice hipGetDevice
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
template <class K>
inline gpuError_t gpuLoadKernel(K kernel) {  // querying a kernel's attributes loads it
  hipFuncAttributes a;
  return hipFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel));
}
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define HETCCL_GPU_KIND "cuda"
typedef cudaStream_t gpuStream_t;
typedef cudaError_t gpuError_t;
#define gpuSuccess cudaSuccess
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDevice cudaGetDevice
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
template <class K>
inline gpuError_t gpuLoadKernel(K kernel) {  // querying a kernel's attributes loads it
  cudaFuncAttributes a;
  return cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel));
}
#endif

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)
#define HETCCL_LAUNCH(kernel, blocks, threads, stream, ...) kernel<<<blocks, threads, 0, stream>>>(__VA_ARGS__)
#endif

#if defined(HETCCL_EMU_BUILD)
#define HETCCL_GPU_BUILD 1
#define HETCCL_DEV inline
#elif defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)
#define HETCCL_GPU_BUILD 1
// Element code runs in kernels only.
#define HETCCL_DEV __device__ __forceinline__
#else  // plain C++: the element codecs alone, for host-side checks
#define HETCCL_DEV inline
#endif

namespace hetccl_gpu {

// 16 bytes, one vector load/store.
struct alignas(16) Raw16 {
  unsigned long long lo, hi;
};

}  // namespace hetccl_gpu
