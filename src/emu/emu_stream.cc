// The emulated GPU's streams and events: each stream is a worker thread
// running its operations in order, after the call that enqueued them
// returned. Also devices and errors.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "emu/emu_stream.h"

namespace emu {
namespace {

thread_local int tDevice = 0;
thread_local emuError_t tError = emuSuccess;

std::mutex& mu() {
  static auto* m = new std::mutex;
  return *m;
}
// Streams not destroyed (so that emuDeviceSynchronize can wait for all);
// never freed itself: worker threads may still run at exit.
std::map<emuStream*, std::shared_ptr<emuStream>>& streams() {
  static auto* s = new std::map<emuStream*, std::shared_ptr<emuStream>>;
  return *s;
}
// Streams destroyed with work left (their worker holds them until it ran):
// emuDeviceSynchronize waits for them too, as cudaDeviceSynchronize waits
// for a destroyed stream's work, so memory freed after a stream's
// destruction (cudaFreeHost synchronises) is no longer in its copies' way.
std::vector<std::weak_ptr<emuStream>>& retiredStreams() {
  static auto* s = new std::vector<std::weak_ptr<emuStream>>;
  return *s;
}
emuStream* defaultStream(int device) {
  static emuStream* defaults[64] = {};  // HETCCL_EMU_DEVICES is at most 64
  std::lock_guard<std::mutex> g(mu());
  if (!defaults[device]) {
    auto s = emuStream::make(device);
    defaults[device] = s.get();
    streams()[s.get()] = std::move(s);
  }
  return defaults[device];
}

int deviceCount() {
  int64_t n = setting(hetccl::settings::kEmuDevices);
  return n > 0 ? static_cast<int>(n) : 8;
}

}  // namespace

int currentDevice() { return tDevice; }

int64_t setting(const hetccl::IntSetting& s) {
  try {
    return s.get();
  } catch (const std::exception&) {
    return 0;
  }
}

emuError_t setError(emuError_t e) {
  if (e != emuSuccess) tError = e;
  return e;
}

emuStream* resolve(emuStream_t s) { return s ? s : defaultStream(tDevice); }

// Waits (on the stream's worker) until pred() holds, polling.
template <class Pred>
void waitUntil(Pred pred) {
  for (int spin = 0; !pred(); ++spin)
    if (spin < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace emu

emuError_t emuEnqueue(emuStream_t stream, std::function<void()> work) {
  emu::resolve(stream)->push(std::move(work));
  return emuSuccess;
}

namespace emu {
namespace {
std::set<const void*>& loadedKernels() {  // guarded by mu()
  static auto* s = new std::set<const void*>;
  return *s;
}
}  // namespace
}  // namespace emu

emuError_t emuLoadKernel(const void* kernel) {
  if (emu::setting(hetccl::settings::kEmuLazyLoading) == 1) {
    std::lock_guard<std::mutex> g(emu::mu());
    emu::loadedKernels().insert(kernel);
  }
  return emuSuccess;
}

emuError_t emuLaunchKernel(const void* kernel, emuStream_t stream, std::function<void()> work) {
  if (emu::setting(hetccl::settings::kEmuLazyLoading) != 0) {
    bool loaded;
    {
      std::lock_guard<std::mutex> g(emu::mu());
      loaded = emu::loadedKernels().count(kernel) != 0;
    }
    if (!loaded) {  // the load waits for the device's streams; another thread's launch meanwhile too
      emuDeviceSynchronize();
      std::lock_guard<std::mutex> g(emu::mu());
      emu::loadedKernels().insert(kernel);
    }
  }
  return emuEnqueue(stream, std::move(work));
}

extern "C" {

emuError_t emuGetDeviceCount(int* count) {
  if (!count) return emu::setError(emuErrorInvalidValue);
  *count = emu::deviceCount();
  return emuSuccess;
}

emuError_t emuGetDevice(int* device) {
  if (!device) return emu::setError(emuErrorInvalidValue);
  *device = emu::tDevice;
  return emuSuccess;
}

emuError_t emuSetDevice(int device) {
  if (device < 0 || device >= emu::deviceCount()) return emu::setError(emuErrorInvalidDevice);
  emu::tDevice = device;
  return emuSuccess;
}

emuError_t emuDeviceSynchronize(void) {
  std::vector<std::shared_ptr<emuStream>> all;
  {
    std::lock_guard<std::mutex> g(emu::mu());
    for (auto& [p, s] : emu::streams())
      if (s->device == emu::tDevice) all.push_back(s);
    auto& retired = emu::retiredStreams();
    retired.erase(std::remove_if(retired.begin(), retired.end(), [](const auto& w) { return w.expired(); }),
                  retired.end());
    for (auto& w : retired)
      if (auto s = w.lock(); s && s->device == emu::tDevice) all.push_back(s);
  }
  for (auto& s : all) s->drain();
  return emuSuccess;
}

emuError_t emuRuntimeGetVersion(int* version) {
  if (!version) return emu::setError(emuErrorInvalidValue);
  *version = 1;
  return emuSuccess;
}

emuError_t emuGetLastError(void) {
  emuError_t e = emu::tError;
  emu::tError = emuSuccess;
  return e;
}

const char* emuGetErrorString(emuError_t e) {
  switch (e) {
    case emuSuccess: return "no error";
    case emuErrorInvalidValue: return "invalid argument";
    case emuErrorMemoryAllocation: return "out of memory";
    case emuErrorInvalidDevice: return "invalid device ordinal";
    case emuErrorNotReady: return "device not ready";
    case emuErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case emuErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "unknown error";
  }
}

emuError_t emuMemcpyAsync(void* dst, const void* src, size_t bytes, int, emuStream_t stream) {
  if (bytes && (!dst || !src)) return emu::setError(emuErrorInvalidValue);
  emuStream* s = emu::resolve(stream);
  s->push([dst, src, bytes, delay = s->copyDelayUs] {
    // HETCCL_EMU_COPY_DELAY_US: copies slower than launches.
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    if (bytes) memmove(dst, src, bytes);
  });
  return emuSuccess;
}

emuError_t emuMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  emuError_t e = emuMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (e != emuSuccess) return e;
  emu::resolve(nullptr)->drain();
  return emuSuccess;
}

emuError_t emuStreamCreateWithFlags(emuStream_t* stream, unsigned flags) {
  return emuStreamCreateWithPriority(stream, flags, 0);
}

emuError_t emuStreamCreateWithPriority(emuStream_t* stream, unsigned, int priority) {
  if (!stream) return emu::setError(emuErrorInvalidValue);
  auto s = emuStream::make(emu::tDevice);
  // Clamped into the range, as CUDA does.
  s->priority = std::min(kEmuLeastPriority, std::max(kEmuGreatestPriority, priority));
  *stream = s.get();
  std::lock_guard<std::mutex> g(emu::mu());
  emu::streams()[s.get()] = std::move(s);
  return emuSuccess;
}

// As CUDA: returns at once; work already enqueued still runs.
emuError_t emuStreamDestroy(emuStream_t stream) {
  if (!stream) return emu::setError(emuErrorInvalidValue);
  std::shared_ptr<emuStream> s;
  {
    std::lock_guard<std::mutex> g(emu::mu());
    auto it = emu::streams().find(stream);
    if (it == emu::streams().end()) return emu::setError(emuErrorInvalidValue);
    s = std::move(it->second);
    emu::streams().erase(it);
    emu::retiredStreams().push_back(s);
  }
  {  // a stream destroyed while capturing ends its capture
    std::lock_guard<std::mutex> g(emu::captureMu());
    auto& v = emu::capturing();
    v.erase(std::remove(v.begin(), v.end(), s.get()), v.end());
  }
  s->retire();
  return emuSuccess;
}

emuError_t emuStreamSynchronize(emuStream_t stream) {
  emu::resolve(stream)->drain();
  return emuSuccess;
}

emuError_t emuStreamQuery(emuStream_t stream) { return emu::resolve(stream)->idle() ? emuSuccess : emuErrorNotReady; }

emuError_t emuEventCreateWithFlags(emuEvent_t* event, unsigned flags) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  *event = new emuEvent;
  (*event)->timed = (flags & 0x2) == 0;  // cudaEventDisableTiming's value
  return emuSuccess;
}

emuError_t emuEventElapsedTime(float* ms, emuEvent_t start, emuEvent_t end) {
  if (!ms || !start || !end || !start->timed || !end->timed) return emu::setError(emuErrorInvalidValue);
  const int64_t t0 = start->lastDoneNs(), t1 = end->lastDoneNs();
  if (t0 < 0 || t1 < 0) return emuErrorNotReady;
  *ms = static_cast<float>(static_cast<double>(t1 - t0) / 1e6);
  return emuSuccess;
}

emuError_t emuEventDestroy(emuEvent_t event) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  event->release();
  return emuSuccess;
}

emuError_t emuEventRecord(emuEvent_t event, emuStream_t stream) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  emuStream* s = emu::resolve(stream);
  {
    std::lock_guard<std::mutex> g(s->mu);
    if (s->captureStatus) {  // a node of the capture's graph
      if (s->captureStatus == 1 && s->captureGraph) {
        emu::CapturedRecord rec;
        emu::graphAddRecord(s->captureGraph, s->captureLane, &rec);
        event->setCaptured(rec);
      }
      return emuSuccess;
    }
  }
  event->setCaptured({});
  const uint64_t n = event->record();
  emu::resolve(stream)->push([event = event->retain(), n] {
    event->complete(
        n, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
               .count());
    event->release();
  });
  return emuSuccess;
}

emuError_t emuEventQuery(emuEvent_t event) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  if (emu::unsafeDuringCapture()) return emu::setError(emuErrorStreamCaptureUnsupported);
  return event->done(event->last()) ? emuSuccess : emuErrorNotReady;
}

emuError_t emuEventSynchronize(emuEvent_t event) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  if (emu::unsafeDuringCapture()) return emu::setError(emuErrorStreamCaptureUnsupported);
  const uint64_t want = event->last();
  emu::waitUntil([&] { return event->done(want); });
  return emuSuccess;
}

emuError_t emuStreamWaitEvent(emuStream_t stream, emuEvent_t event, unsigned) {
  if (!event) return emu::setError(emuErrorInvalidValue);
  if (emuError_t e = emu::captureWait(emu::resolve(stream), event); e != emuErrorNotReady) return e;
  const uint64_t want = event->last();  // the record made last, as CUDA captures it
  emu::resolve(stream)->push([event = event->retain(), want] {
    emu::waitUntil([&] { return event->done(want); });
    event->release();
  });
  return emuSuccess;
}

emuError_t emuLaunchHostFunc(emuStream_t stream, void (*fn)(void*), void* arg) {
  if (!fn) return emu::setError(emuErrorInvalidValue);
  emu::resolve(stream)->push([fn, arg] { fn(arg); });
  return emuSuccess;
}

int emuStreamWaitValue64(emuStream_t stream, uint64_t addr, uint64_t value, unsigned flags) {
  if (!addr || flags != 0) return emu::setError(emuErrorInvalidValue);
  auto* p = reinterpret_cast<const volatile uint64_t*>(addr);
  emu::resolve(stream)->push([p, value] {
    // Done only where CUDA's cyclic comparison and HIP's unsigned one both
    // say so: a flag protocol that relies on either alone hangs here.
    emu::waitUntil([&] {
      const uint64_t cur = __atomic_load_n(const_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
      return cur >= value && static_cast<int64_t>(cur - value) >= 0;
    });
  });
  return emuSuccess;
}

int emuStreamWriteValue64(emuStream_t stream, uint64_t addr, uint64_t value, unsigned flags) {
  if (!addr || flags != 0) return emu::setError(emuErrorInvalidValue);
  auto* p = reinterpret_cast<uint64_t*>(addr);
  // Runs after the stream's earlier work; the release store publishes what
  // that work wrote to readers in other processes.
  emu::resolve(stream)->push([p, value] { __atomic_store_n(p, value, __ATOMIC_RELEASE); });
  return emuSuccess;
}

}  // extern "C"

emuError_t emuStreamGetId(emuStream_t stream, unsigned long long* id) {
  if (!id) return emu::setError(emuErrorInvalidValue);
  *id = emu::resolve(stream)->id;
  return emuSuccess;
}

emuError_t emuDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = kEmuLeastPriority;
  if (greatest) *greatest = kEmuGreatestPriority;
  return emuSuccess;
}

emuError_t emuStreamGetPriority(emuStream_t stream, int* priority) {
  if (!priority) return emu::setError(emuErrorInvalidValue);
  *priority = emu::resolve(stream)->priority;
  return emuSuccess;
}
