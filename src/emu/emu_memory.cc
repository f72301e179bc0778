// The emulated GPU's memory: regions of device memory (one device each),
// pinned and registered host memory, and what a pointer is.
#include <sys/mman.h>

#include <atomic>
#include <map>
#include <mutex>

#include "core/settings.h"
#include "emu/emu_state.h"

namespace {

enum class Region { kDevice, kPinned, kRegistered };

struct Entry {
  size_t bytes;
  Region kind;
  int device;
};

std::mutex& mu() {
  static auto* m = new std::mutex;
  return *m;
}
// By start address; never destroyed (device memory may be freed late).
std::map<uintptr_t, Entry>& regions() {
  static auto* r = new std::map<uintptr_t, Entry>;
  return *r;
}

// The region holding p, or regions().end().
std::map<uintptr_t, Entry>::iterator find(const void* p) {
  auto& r = regions();
  uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = r.upper_bound(a);
  if (it == r.begin()) return r.end();
  --it;
  return a < it->first + it->second.bytes ? it : r.end();
}

void* mapPages(size_t bytes) {
  void* p = mmap(nullptr, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// HETCCL_EMU_FAIL_ALLOC=N: the N-th allocation of the process (device or
// pinned host memory) fails.
bool injectFailure() {
  static std::atomic<int64_t> count{0};
  int64_t n = emu::setting(hetccl::settings::kEmuFailAlloc);
  return n > 0 && count.fetch_add(1) + 1 == n;
}

emuError_t add(void* p, size_t bytes, Region kind) {
  std::lock_guard<std::mutex> g(mu());
  regions()[reinterpret_cast<uintptr_t>(p)] = Entry{bytes ? bytes : 1, kind, emu::currentDevice()};
  return emuSuccess;
}

emuError_t drop(void* p, Region kind, bool unmap) {
  if (!p) return emuSuccess;
  std::lock_guard<std::mutex> g(mu());
  auto it = regions().find(reinterpret_cast<uintptr_t>(p));
  if (it == regions().end() || it->second.kind != kind) return emu::setError(emuErrorInvalidValue);
  if (unmap) munmap(p, it->second.bytes);
  regions().erase(it);
  return emuSuccess;
}

// Device and pinned memory alike: fresh pages, counted by HETCCL_EMU_FAIL_ALLOC.
emuError_t allocate(void** ptr, size_t bytes, Region kind) {
  if (!ptr) return emu::setError(emuErrorInvalidValue);
  *ptr = nullptr;
  if (injectFailure()) return emu::setError(emuErrorMemoryAllocation);
  void* p = mapPages(bytes);
  if (!p) return emu::setError(emuErrorMemoryAllocation);
  *ptr = p;
  return add(p, bytes, kind);
}

}  // namespace

extern "C" {

emuError_t emuMalloc(void** ptr, size_t bytes) { return allocate(ptr, bytes, Region::kDevice); }

// Memory a stream may still use goes once the work enqueued before is done.
emuError_t emuFree(void* ptr) {
  emuDeviceSynchronize();
  return drop(ptr, Region::kDevice, true);
}

emuError_t emuHostAlloc(void** ptr, size_t bytes, unsigned) { return allocate(ptr, bytes, Region::kPinned); }

emuError_t emuFreeHost(void* ptr) {
  emuDeviceSynchronize();
  return drop(ptr, Region::kPinned, true);
}

emuError_t emuHostGetDevicePointer(void** dptr, void* hptr, unsigned) {
  if (!dptr) return emu::setError(emuErrorInvalidValue);
  std::lock_guard<std::mutex> g(mu());
  auto it = find(hptr);
  if (it == regions().end() || it->second.kind == Region::kDevice) return emu::setError(emuErrorInvalidValue);
  *dptr = hptr;  // host memory is mapped at the same address "on the device"
  return emuSuccess;
}

emuError_t emuHostRegister(void* ptr, size_t bytes, unsigned) {
  if (!ptr || !bytes) return emu::setError(emuErrorInvalidValue);
  {
    std::lock_guard<std::mutex> g(mu());
    if (find(ptr) != regions().end()) return emu::setError(emuErrorInvalidValue);  // registered already
  }
  return add(ptr, bytes, Region::kRegistered);
}

emuError_t emuHostUnregister(void* ptr) { return drop(ptr, Region::kRegistered, false); }

emuError_t emuPointerGetAttributes(emuPointerAttributes* attr, const void* ptr) {
  if (!attr) return emu::setError(emuErrorInvalidValue);
  *attr = emuPointerAttributes{0, -1, nullptr, nullptr};
  std::lock_guard<std::mutex> g(mu());
  auto it = find(ptr);
  if (it == regions().end()) return emuSuccess;  // unregistered host memory (CUDA 11+ answers so too)
  attr->device = it->second.device;
  if (it->second.kind == Region::kDevice) {
    attr->type = 2;
    attr->devicePointer = const_cast<void*>(ptr);
  } else {
    attr->type = 1;
    attr->devicePointer = attr->hostPointer = const_cast<void*>(ptr);
  }
  return emuSuccess;
}

}  // extern "C"
