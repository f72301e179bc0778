// The GPU device runtimes ("cuda", "hip") over a GpuApi table. A GPU rank is
// bound to the device that is current on the thread creating the
// communicator, as with NCCL.
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "device/device.h"
#include "core/settings.h"
#include "device/gpu_api.h"
#include "device/hw_queues.h"

namespace hetccl {
namespace {

// Attributes as both runtimes lay them out at the front of their struct;
// the rest (which grew over versions) is room we never read.
struct PointerAttributes {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  unsigned char rest[192];
};

// Fallback completion wait when the stream cannot wait on memory: a host
// function on the stream that polls the flag (bounded by the timeout).
struct HostWait {
  volatile uint64_t* flag;
  uint64_t value;
  double timeoutS;
};

// Fallback stream store where the runtime has no stream memory operations.
struct HostWrite {
  volatile uint64_t* flag;
  uint64_t value;
};

void hostWriteFn(void* p) {
  auto* w = static_cast<HostWrite*>(p);
  __atomic_store_n(const_cast<uint64_t*>(w->flag), w->value, __ATOMIC_RELEASE);
  delete w;
}

void hostWaitFn(void* p) {
  auto* w = static_cast<HostWait*>(p);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(w->timeoutS + 5);
  while (__atomic_load_n(w->flag, __ATOMIC_ACQUIRE) < w->value && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  delete w;
}

// Event queries, allocations and registrations come from hetccl's threads
// (the proxy watching a call, growing scratch) while the application may
// capture a graph on another thread: in CUDA's global capture mode
// (torch.cuda.graph's default) such a call fails and invalidates that
// capture. Thread-local mode, for the call alone, makes it see only this
// thread's captures (as torch's own watchdog does for its queries).
class CaptureModeScope {
 public:
  // mode 1, thread-local; 2, relaxed (pinned allocations, which a capture
  // on this thread makes for a captured call across groups).
  explicit CaptureModeScope(const GpuApi& api, int mode = 1) : api_(api), mode_(mode) {
    if (api_.threadExchangeStreamCaptureMode && api_.threadExchangeStreamCaptureMode(&mode_) != 0) {
      api_.getLastError();
      set_ = false;
    }
  }
  ~CaptureModeScope() {
    if (api_.threadExchangeStreamCaptureMode && set_) api_.threadExchangeStreamCaptureMode(&mode_);
  }
  CaptureModeScope(const CaptureModeScope&) = delete;
  CaptureModeScope& operator=(const CaptureModeScope&) = delete;

 private:
  const GpuApi& api_;
  int mode_;  // the mode in scope; the previous one while in scope
  bool set_ = true;
};

class GpuRuntime : public DeviceRuntime {
 public:
  explicit GpuRuntime(const std::string& kind) : api_(loadGpuApi(kind)) {
    if (kind == "emu") {
      // The emulated runtime takes these as they are (it has no way to say
      // what is wrong with one): refused here, by name.
      for (const IntSetting* s : {&settings::kEmuDevices, &settings::kEmuStallUs, &settings::kEmuCopyDelayUs,
                                  &settings::kEmuFailAlloc, &settings::kEmuInitDelayMs})
        (void)s->get();
    }
    int n = 0;
    GpuApi::Status s = api_.getDeviceCount(&n);
    if (s != 0 || n <= 0)
      throwError(hetcclInvalidUsage, "device kind '" + kind + "': no " + kind + " device is visible (" +
                                         (s != 0 ? api_.getErrorString(s) : "device count 0") + ")");
    api_.check(api_.getDevice(&dev_), "getDevice");
    // Where the device reaches registered host memory at its host address
    // (cudaDevAttrCanUseHostPointerForRegisteredMem; pinned allocations are
    // mapped at their host address under unified addressing), a stream
    // memory operation needs no address lookup first: one runtime call fewer
    // for each flag a border call waits on or stores.
    constexpr int kHostPointerForRegisteredMem = 91;
    int same = 0;
    hostAddressIsDevice_ =
        api_.deviceGetAttribute && api_.deviceGetAttribute(&same, kHostPointerForRegisteredMem, dev_) == 0 && same == 1;
    LOG_INFO(kDevice, "%s rank on device %d of %d", kind.c_str(), dev_, n);
    if (kind == "cuda") noteHardwareQueues();
  }

  const char* kind() const override { return api_.kind.c_str(); }
  int deviceId() const override { return dev_; }
  bool synchronous() const override { return false; }
  void makeCurrent() override { api_.check(api_.setDevice(dev_), "setDevice"); }

  MemKind pointerKind(const void* ptr) const override {
    PointerAttributes a{};
    if (api_.pointerGetAttributes(&a, ptr) != 0) {
      api_.getLastError();  // HIP 5 fails on unregistered host memory; clear it
      return MemKind::kHost;
    }
    int host = 1, device = 2, managed = 3;
    if (api_.hipLegacyMemTypes) host = 0, device = 1, managed = 4;
    if (a.type == device || a.type == managed) return a.device == dev_ ? MemKind::kDevice : MemKind::kOtherDevice;
    if (a.type == host) return MemKind::kPinnedHost;
    return MemKind::kHost;
  }

  // A pointer found to be this device's memory stays so until the caller
  // frees it; the vendor runtime keeps freed device addresses reserved, so
  // host memory does not come back at them, and a freed one handed on is
  // what the vendor library would get without hetccl (NCCL itself checks
  // no pointer unless NCCL_CHECK_POINTERS is set). Lookups and stores are
  // relaxed atomics: calls on other threads may race here harmlessly.
  MemKind bufferKind(const void* ptr) override {
    const auto bits = reinterpret_cast<uintptr_t>(ptr);
    std::atomic<const void*>& slot = knownBuffers_[((bits >> 9) ^ (bits >> 17)) % kKnownBuffers];
    if (ptr && slot.load(std::memory_order_relaxed) == ptr) return MemKind::kDevice;
    const MemKind k = pointerKind(ptr);
    if (k == MemKind::kDevice) slot.store(ptr, std::memory_order_relaxed);
    return k;
  }

  void* alloc(size_t bytes) override {
    CaptureModeScope threadLocal(api_);
    void* p = nullptr;
    api_.check(api_.malloc(&p, bytes ? bytes : 256), "malloc");
    return p;
  }
  void free(void* ptr) override {
    if (ptr) api_.free(ptr);
  }
  void* allocPinned(size_t bytes) override {
    CaptureModeScope relaxed(api_, 2);
    void* p = nullptr;
    api_.check(api_.hostAlloc(&p, bytes ? bytes : 256, GpuApi::kHostAllocPortableMapped), "hostAlloc");
    return p;
  }
  void freePinned(void* ptr) override {
    if (ptr) api_.freeHost(ptr);
  }
  void copy(void* dst, const void* src, size_t bytes, Stream s) override {
    if (bytes == 0 || dst == src) return;
    api_.check(api_.memcpyAsync(dst, src, bytes, GpuApi::kMemcpyDefault, s), "memcpyAsync");
  }
  Stream createStream(Priority p) override {
    void* s = nullptr;
    if (p == Priority::kHighest && api_.streamCreateWithPriority && api_.deviceGetStreamPriorityRange) {
      int least = 0, greatest = 0;
      if (api_.deviceGetStreamPriorityRange(&least, &greatest) == 0) {
        api_.check(api_.streamCreateWithPriority(&s, GpuApi::kStreamNonBlocking, greatest), "streamCreateWithPriority");
        return s;
      }
      api_.getLastError();  // no range: the default priority (not a sticky error)
    }
    api_.check(api_.streamCreateWithFlags(&s, GpuApi::kStreamNonBlocking), "streamCreateWithFlags");
    return s;
  }
  int streamPriority(Stream s) override {
    int p = 0;
    if (!api_.streamGetPriority || api_.streamGetPriority(s, &p) != 0) {
      if (api_.streamGetPriority) api_.getLastError();
      return 0;
    }
    return p;
  }
  void destroyStream(Stream s) override {
    if (s) api_.streamDestroy(s);
  }
  Event createEvent() override {
    void* e = nullptr;
    api_.check(api_.eventCreateWithFlags(&e, GpuApi::kEventDisableTiming), "eventCreateWithFlags");
    return e;
  }
  Event createTimedEvent() override {
    void* e = nullptr;
    api_.check(api_.eventCreateWithFlags(&e, 0), "eventCreateWithFlags");
    return e;
  }
  double elapsedUs(Event start, Event end) override {
    float ms = 0;
    CaptureModeScope threadLocal(api_);
    if (!api_.eventElapsedTime || api_.eventElapsedTime(&ms, start, end) != 0) {
      api_.getLastError();  // not sticky: clear it
      return -1;
    }
    return static_cast<double>(ms) * 1000;
  }
  void destroyEvent(Event e) override {
    if (e) api_.eventDestroy(e);
  }
  void recordEvent(Event e, Stream s) override { api_.check(api_.eventRecord(e, s), "eventRecord"); }
  bool eventDone(Event e) override {
    CaptureModeScope threadLocal(api_);
    GpuApi::Status s = api_.eventQuery(e);
    if (s == GpuApi::kNotReady) return false;
    api_.check(s, "eventQuery");
    return true;
  }
  void streamWaitEvent(Stream s, Event e) override { api_.check(api_.streamWaitEvent(s, e, 0), "streamWaitEvent"); }
  bool capturing(Stream s) override {
    int status = 0;
    if (!api_.streamIsCapturing || api_.streamIsCapturing(s, &status) != 0) {
      if (api_.streamIsCapturing) api_.getLastError();
      return false;
    }
    return status != 0;
  }

  uint64_t streamId(Stream s) override {
    unsigned long long id = 0;
    if (!api_.streamGetId) return 0;
    if (api_.streamGetId(s, &id) != 0) {
      api_.getLastError();
      return 0;
    }
    return id;
  }

  void streamWaitValue(Stream s, volatile uint64_t* flag, uint64_t value) override {
    if (waitValueWorks_) {
      void* dptr = flagOnDevice(flag);
      int r = api_.cuWaitValue64    ? api_.cuWaitValue64(s, reinterpret_cast<uintptr_t>(dptr), value, 0)
              : api_.hipWaitValue64 ? api_.hipWaitValue64(s, dptr, value, 0, ~uint64_t{0})
                                    : -1;
      if (r == 0) return;
      // Not supported on this device or driver: use the host function from now on.
      LOG_INFO(kDevice, "stream wait-value unavailable (error %d); completion waits run as host functions", r);
      waitValueWorks_ = false;
    }
    // A graph cannot replay the polling host function (it frees its state
    // when it returns): a capture that meets the fallback is refused.
    if (capturing(s))
      throwRefused(hetcclInvalidUsage, std::string("a stream wait-value cannot be captured on this ") + kind() +
                                           " device: it runs as a host function, which a graph cannot replay");
    api_.check(api_.launchHostFunc(s, hostWaitFn, new HostWait{flag, value, hostWaitTimeoutS_}), "launchHostFunc");
  }

  void streamWriteValue(Stream s, volatile uint64_t* flag, uint64_t value) override {
    if (writeValueWorks_) {
      void* dptr = flagOnDevice(flag);
      int r = api_.cuWriteValue64    ? api_.cuWriteValue64(s, reinterpret_cast<uintptr_t>(dptr), value, 0)
              : api_.hipWriteValue64 ? api_.hipWriteValue64(s, dptr, value, 0)
                                     : -1;
      if (r == 0) return;
      LOG_INFO(kDevice, "stream write-value unavailable (error %d); stream stores run as host functions", r);
      writeValueWorks_ = false;
    }
    api_.check(api_.launchHostFunc(s, hostWriteFn, new HostWrite{flag, value}), "launchHostFunc");
  }

  bool waitValueOnDevice() override { return waitValueWorks_; }
  void launchHostFunc(Stream s, void (*fn)(void*), void* arg) override {
    api_.check(api_.launchHostFunc(s, fn, arg), "launchHostFunc");
  }
  bool tieToCapture(Stream s, void (*destroy)(void*), void* arg) override {
    void* graph = nullptr;
    if (!api_.userObjectCreate || !api_.graphRetainUserObject) return false;
    if (!api_.captureGraph(s, &graph))
      throwRefused(hetcclInvalidUsage,
                   "the capture on this stream was invalidated (an earlier call of it failed, or "
                   "a call a capture forbids was made): a call across groups cannot join it");
    void* obj = nullptr;
    constexpr unsigned kNoDestructorSync = 1, kMove = 1;  // cudaUserObjectNoDestructorSync, cudaGraphUserObjectMove
    api_.check(api_.userObjectCreate(&obj, arg, destroy, 1, kNoDestructorSync), "userObjectCreate");
    if (GpuApi::Status r = api_.graphRetainUserObject(graph, obj, 1, kMove); r != 0) {
      // The object is left unreleased: releasing it would run destroy(arg),
      // and the caller still owns arg when this throws.
      api_.check(r, "graphRetainUserObject");
    }
    return true;
  }
  void registerHost(void* ptr, size_t bytes) override {
    CaptureModeScope threadLocal(api_);
    api_.check(api_.hostRegister(ptr, bytes, GpuApi::kHostAllocPortableMapped), "hostRegister");
  }
  void unregisterHost(void* ptr) override {
    if (ptr) api_.hostUnregister(ptr);
  }
  void* devicePointer(void* host) override {
    void* d = nullptr;
    api_.check(api_.hostGetDevicePointer(&d, host, 0), "hostGetDevicePointer");
    return d;
  }
  uint64_t physicalGpu() const override {
    char bus[64] = {};
    if (!api_.deviceGetPCIBusId || api_.deviceGetPCIBusId(bus, sizeof(bus) - 1, dev_) != 0 || !bus[0]) return 0;
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the PCI address
    for (const char* c = bus; *c; ++c) h = (h ^ static_cast<uint8_t>(*c)) * 1099511628211ull;
    return h ? h : 1;
  }
  bool mpsShared() const override {
    constexpr int kMpsEnabled = 133;  // cudaDevAttrMpsEnabled
    int v = 0;
    return api_.deviceGetAttribute && api_.deviceGetAttribute(&v, kMpsEnabled, dev_) == 0 && v != 0;
  }

 private:
  // Where this device reaches a flag in pinned or registered host memory.
  void* flagOnDevice(volatile uint64_t* flag) {
    auto* host = const_cast<uint64_t*>(flag);
    if (hostAddressIsDevice_) return host;
    void* dptr = nullptr;
    api_.check(api_.hostGetDevicePointer(&dptr, host, 0), "hostGetDevicePointer");
    return dptr;
  }

  const GpuApi& api_;
  static constexpr size_t kKnownBuffers = 64;  // a bucketed model's buffers, or a training step's
  std::array<std::atomic<const void*>, kKnownBuffers> knownBuffers_{};
  int dev_ = 0;
  bool hostAddressIsDevice_ = false;
  bool waitValueWorks_ = api_.cuWaitValue64 || api_.hipWaitValue64;
  bool writeValueWorks_ = api_.cuWriteValue64 || api_.hipWriteValue64;
  double hostWaitTimeoutS_ = 600;
};

}  // namespace

std::unique_ptr<DeviceRuntime> createGpuRuntime(const std::string& kind) { return std::make_unique<GpuRuntime>(kind); }

}  // namespace hetccl
