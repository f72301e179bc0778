#include "gpu.h"

#include <stdexcept>

#include "hetccl/hetccl.h"

namespace perf {
namespace {

void check(hetcclResult_t r, const char* what) {
  if (r != hetcclSuccess) throw std::runtime_error(std::string(what) + " failed: " + hetcclGetLastError(nullptr));
}

Gpu* gTool = nullptr;

}  // namespace

Gpu::Gpu(const std::string& kind, int device) : kind_(kind), device_(device) {
  check(hetcclDeviceSet(kind_.c_str(), device), "hetcclDeviceSet");
  check(hetcclStreamCreate(kind_.c_str(), &stream_), "hetcclStreamCreate");
}

void* Gpu::alloc(size_t bytes) {
  void* p = nullptr;
  check(hetcclDeviceAlloc(kind_.c_str(), &p, bytes), "hetcclDeviceAlloc");
  return p;
}

void Gpu::free(void* p) { hetcclDeviceFree(kind_.c_str(), p); }

void Gpu::toDevice(void* dst, const void* src, size_t bytes) {
  sync();
  check(hetcclDeviceCopy(kind_.c_str(), dst, src, bytes), "hetcclDeviceCopy");
}

void Gpu::toHost(void* dst, const void* src, size_t bytes) {
  sync();
  check(hetcclDeviceCopy(kind_.c_str(), dst, src, bytes), "hetcclDeviceCopy");
}

void Gpu::sync() { check(hetcclStreamSynchronize(kind_.c_str(), stream_), "hetcclStreamSynchronize"); }

int Gpu::deviceCount(const std::string& kind) {
  int n = 0;
  return hetcclDeviceCount(kind.c_str(), &n) == hetcclSuccess ? n : 0;
}

Gpu* toolGpu() { return gTool; }
void setToolGpu(Gpu* g) { gTool = g; }

}  // namespace perf
