// extern "C" device helpers: memory, copies and streams of a device kind
// through the runtime hetccl loads (hetccl.h says who they are for).
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/guard.h"
#include "device/gpu_api.h"

using namespace hetccl;

namespace {

bool isHost(const char* kind) {
  HETCCL_CHECK_ARG(kind, "kind is NULL");
  return strcmp(kind, "host") == 0;
}

// The runtime of a GPU kind (throws naming the kind and what was tried).
const GpuApi& runtime(const char* kind) { return loadGpuApi(kind); }

constexpr int kMemcpyDefault = 4;  // cudaMemcpyDefault == hipMemcpyDefault

}  // namespace

extern "C" {

hetcclResult_t hetcclDeviceCount(const char* kind, int* count) {
  return guard(nullptr, "hetcclDeviceCount", [&] {
    HETCCL_CHECK_ARG(count, "count is NULL");
    *count = 0;
    if (isHost(kind)) return void(*count = 1);
    const GpuApi& g = runtime(kind);
    if (g.getDeviceCount(count) != 0) *count = 0;
  });
}

hetcclResult_t hetcclDeviceSet(const char* kind, int device) {
  return guard(nullptr, "hetcclDeviceSet", [&] {
    if (isHost(kind)) return;
    const GpuApi& g = runtime(kind);
    g.check(g.setDevice(device), "setDevice");
  });
}

hetcclResult_t hetcclDeviceAlloc(const char* kind, void** ptr, size_t bytes) {
  return guard(nullptr, "hetcclDeviceAlloc", [&] {
    HETCCL_CHECK_ARG(ptr, "ptr is NULL");
    *ptr = nullptr;
    if (isHost(kind)) {
      *ptr = aligned_alloc(4096, ((bytes ? bytes : 1) + 4095) & ~size_t{4095});
      if (!*ptr) throwError(hetcclSystemError, "out of memory allocating " + std::to_string(bytes) + " bytes");
      return;
    }
    const GpuApi& g = runtime(kind);
    g.check(g.malloc(ptr, bytes ? bytes : 1), "malloc");
  });
}

hetcclResult_t hetcclDeviceFree(const char* kind, void* ptr) {
  return guard(nullptr, "hetcclDeviceFree", [&] {
    if (!ptr) return;
    if (isHost(kind)) return free(ptr);
    const GpuApi& g = runtime(kind);
    g.check(g.free(ptr), "free");
  });
}

hetcclResult_t hetcclDeviceCopy(const char* kind, void* dst, const void* src, size_t bytes) {
  return guard(nullptr, "hetcclDeviceCopy", [&] {
    HETCCL_CHECK_ARG(bytes == 0 || (dst && src), "dst or src is NULL");
    if (isHost(kind)) return void(memmove(dst, src, bytes));
    const GpuApi& g = runtime(kind);
    g.check(g.memcpyAsync(dst, src, bytes, kMemcpyDefault, nullptr), "memcpyAsync");
    g.check(g.streamSynchronize(nullptr), "streamSynchronize");
  });
}

hetcclResult_t hetcclStreamCreate(const char* kind, hetcclStream_t* stream) {
  return guard(nullptr, "hetcclStreamCreate", [&] {
    HETCCL_CHECK_ARG(stream, "stream is NULL");
    *stream = nullptr;
    if (isHost(kind)) return;  // host ranks pass NULL
    const GpuApi& g = runtime(kind);
    g.check(g.streamCreateWithFlags(stream, GpuApi::kStreamNonBlocking), "streamCreateWithFlags");
  });
}

hetcclResult_t hetcclStreamDestroy(const char* kind, hetcclStream_t stream) {
  return guard(nullptr, "hetcclStreamDestroy", [&] {
    if (isHost(kind) || !stream) return;
    const GpuApi& g = runtime(kind);
    g.check(g.streamDestroy(stream), "streamDestroy");
  });
}

hetcclResult_t hetcclStreamSynchronize(const char* kind, hetcclStream_t stream) {
  return guard(nullptr, "hetcclStreamSynchronize", [&] {
    if (isHost(kind)) return;
    const GpuApi& g = runtime(kind);
    g.check(g.streamSynchronize(stream), "streamSynchronize");
  });
}

}  // extern "C"
