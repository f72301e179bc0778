#include "gpu.h"

#include <dlfcn.h>

#include <stdexcept>

namespace perf {
namespace {

struct Cuda {
  int (*setDevice)(int);
  int (*getDeviceCount)(int*);
  int (*malloc)(void**, size_t);
  int (*free)(void*);
  int (*memcpy)(void*, const void*, size_t, int);
  int (*streamCreate)(void**);
  int (*streamSynchronize)(void*);
  const char* (*errorString)(int);
};

const Cuda* cuda() {
  static const Cuda* api = [] () -> const Cuda* {
    void* lib = nullptr;
    for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return nullptr;
    auto* c = new Cuda;
    c->setDevice = reinterpret_cast<int (*)(int)>(dlsym(lib, "cudaSetDevice"));
    c->getDeviceCount = reinterpret_cast<int (*)(int*)>(dlsym(lib, "cudaGetDeviceCount"));
    c->malloc = reinterpret_cast<int (*)(void**, size_t)>(dlsym(lib, "cudaMalloc"));
    c->free = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaFree"));
    c->memcpy = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(dlsym(lib, "cudaMemcpy"));
    c->streamCreate = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cudaStreamCreate"));
    c->streamSynchronize = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaStreamSynchronize"));
    c->errorString = reinterpret_cast<const char* (*)(int)>(dlsym(lib, "cudaGetErrorString"));
    if (!c->setDevice || !c->getDeviceCount || !c->malloc || !c->free || !c->memcpy || !c->streamCreate ||
        !c->streamSynchronize || !c->errorString)
      return nullptr;
    return c;
  }();
  return api;
}

const Cuda& need() {
  const Cuda* c = cuda();
  if (!c) throw std::runtime_error("GPU ranks need the CUDA runtime (libcudart.so.13/.12), which cannot be loaded");
  return *c;
}

void check(int r, const char* what) {
  if (r != 0) throw std::runtime_error(std::string(what) + " failed: " + need().errorString(r));
}

constexpr int kMemcpyDefault = 4;
Gpu* gTool = nullptr;

}  // namespace

Gpu::Gpu(int device) : device_(device) {
  check(need().setDevice(device), "cudaSetDevice");
  check(need().streamCreate(&stream_), "cudaStreamCreate");
}

void* Gpu::alloc(size_t bytes) {
  void* p = nullptr;
  check(need().malloc(&p, bytes ? bytes : 1), "cudaMalloc");
  return p;
}

void Gpu::free(void* p) {
  if (p) need().free(p);
}

void Gpu::toDevice(void* dst, const void* src, size_t bytes) {
  sync();
  check(need().memcpy(dst, src, bytes, kMemcpyDefault), "cudaMemcpy");
}

void Gpu::toHost(void* dst, const void* src, size_t bytes) {
  sync();
  check(need().memcpy(dst, src, bytes, kMemcpyDefault), "cudaMemcpy");
}

void Gpu::sync() { check(need().streamSynchronize(stream_), "cudaStreamSynchronize"); }

int Gpu::deviceCount() {
  int n = 0;
  if (!cuda() || cuda()->getDeviceCount(&n) != 0) return 0;
  return n;
}

Gpu* toolGpu() { return gTool; }
void setToolGpu(Gpu* g) { gTool = g; }

}  // namespace perf
