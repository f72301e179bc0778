// The host device runtime: plain CPU memory, no streams.
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "device/device.h"

namespace hetccl {
namespace {

class HostRuntime : public DeviceRuntime {
 public:
  const char* kind() const override { return "host"; }
  MemKind pointerKind(const void*) const override { return MemKind::kHost; }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) throwError(hetcclSystemError, "out of host memory");
    return p;
  }
  void free(void* ptr) override { ::free(ptr); }
  void copy(void* dst, const void* src, size_t bytes, Stream) override {
    if (dst != src && bytes) memmove(dst, src, bytes);
  }
  bool synchronous() const override { return true; }
};

}  // namespace

const char* memKindName(MemKind k) {
  switch (k) {
    case MemKind::kHost: return "host memory";
    case MemKind::kPinnedHost: return "pinned host memory";
    case MemKind::kDevice: return "device memory";
    case MemKind::kOtherDevice: return "another device's memory";
    default: return "unknown memory";
  }
}

std::vector<std::string> deviceKinds() { return {"host"}; }

std::unique_ptr<DeviceRuntime> createDeviceRuntime(const std::string& kind) {
  if (kind == "host") return std::make_unique<HostRuntime>();
  throwError(hetcclInvalidArgument, "device kind '" + kind + "' is not available in this build (known: host)");
}

}  // namespace hetccl
