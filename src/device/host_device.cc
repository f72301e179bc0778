// The host device runtime (plain CPU memory, no streams), the device
// registry, and what all runtimes share.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "device/device.h"
#include "device/event_wait.h"
#include "device/gpu_api.h"

namespace hetccl {
namespace {

class HostRuntime : public DeviceRuntime {
 public:
  const char* kind() const override { return "host"; }
  // A process that uses a GPU runtime may hand a host rank device memory by
  // mistake: recognise it when that runtime is loaded already.
  MemKind pointerKind(const void* ptr) const override {
    // Probing for a loaded runtime costs a loader lookup: do it at the first
    // call and then every 4096 calls until one is found.
    if (!probed_[0] && !probed_[1] && (probes_++ & 4095) == 0) {
      probed_[0] = loadedGpuApi("cuda");
      probed_[1] = loadedGpuApi("hip");
    }
    for (const GpuApi* api : probed_) {
      if (!api) continue;
      unsigned char attr[256] = {};
      int type = 0;
      if (api->pointerGetAttributes(attr, ptr) != 0) {
        api->getLastError();
        continue;
      }
      memcpy(&type, attr, sizeof(int));
      int device = api->hipLegacyMemTypes ? 1 : 2;
      if (type == device) return MemKind::kOtherDevice;
    }
    return MemKind::kHost;
  }
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

 private:
  mutable const GpuApi* probed_[2] = {nullptr, nullptr};
  mutable unsigned probes_ = 0;
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

namespace {
[[noreturn]] void notStreamOrdered(const char* what) {
  throwError(hetcclInternalError, std::string("device runtime: ") + what + " on a host rank");
}
}  // namespace

void* DeviceRuntime::allocPinned(size_t) { notStreamOrdered("allocPinned"); }
void DeviceRuntime::freePinned(void*) { notStreamOrdered("freePinned"); }
Stream DeviceRuntime::createStream(Priority) { notStreamOrdered("createStream"); }
void DeviceRuntime::destroyStream(Stream) { notStreamOrdered("destroyStream"); }
Event DeviceRuntime::createEvent() { notStreamOrdered("createEvent"); }
Event DeviceRuntime::createTimedEvent() { notStreamOrdered("createTimedEvent"); }
double DeviceRuntime::elapsedUs(Event, Event) { return -1; }
void DeviceRuntime::destroyEvent(Event) { notStreamOrdered("destroyEvent"); }
void DeviceRuntime::recordEvent(Event, Stream) { notStreamOrdered("recordEvent"); }
bool DeviceRuntime::eventDone(Event) { notStreamOrdered("eventDone"); }
void DeviceRuntime::streamWaitEvent(Stream, Event) { notStreamOrdered("streamWaitEvent"); }
void DeviceRuntime::streamWaitValue(Stream, volatile uint64_t*, uint64_t) { notStreamOrdered("streamWaitValue"); }
void DeviceRuntime::streamWriteValue(Stream, volatile uint64_t*, uint64_t) { notStreamOrdered("streamWriteValue"); }
void DeviceRuntime::registerHost(void*, size_t) { notStreamOrdered("registerHost"); }
void DeviceRuntime::unregisterHost(void*) { notStreamOrdered("unregisterHost"); }
void* DeviceRuntime::devicePointer(void*) { notStreamOrdered("devicePointer"); }
void DeviceRuntime::launchHostFunc(Stream, void (*)(void*), void*) { notStreamOrdered("launchHostFunc"); }

void waitEvent(DeviceRuntime& d, Event e, double timeoutS, const std::atomic<bool>* abort, const char* what) {
  waitEventChecked(d, e, timeoutS, abort, what, {});
}

std::unique_ptr<DeviceRuntime> createGpuRuntime(const std::string& kind);  // gpu_device.cc

std::vector<std::string> deviceKinds() { return {"host", "cuda", "hip", "emu"}; }

std::unique_ptr<DeviceRuntime> createDeviceRuntime(const std::string& kind) {
  if (kind == "host") return std::make_unique<HostRuntime>();
  if (kind == "cuda" || kind == "hip" || kind == "emu") return createGpuRuntime(kind);
  throwError(hetcclInvalidArgument, "device kind '" + kind + "' is unknown (known: host, cuda, hip, emu)");
}

}  // namespace hetccl
