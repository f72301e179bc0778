// Device runtime interface: the memory and ordering primitives of one device
// kind (host, cuda, hip), behind which hetccl never names a vendor API.
// The host runtime is built in; GPU runtimes are loaded at run time where
// their driver exists, so one build serves NVIDIA, AMD and CPU nodes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetccl {

// What a release stores into a stream flag (abort, a failed peer): above any
// value a stream waits for, under both comparisons of streamWaitValue (a
// value of ~0 is -1 to CUDA's cyclic one and releases nothing).
inline constexpr uint64_t kFlagReleased = uint64_t{1} << 62;

// An opaque vendor stream (cudaStream_t, hipStream_t); null on host ranks.
using Stream = void*;

enum class MemKind { kHost, kPinnedHost, kDevice, kOtherDevice, kUnknown };
const char* memKindName(MemKind k);

// An opaque vendor event (cudaEvent_t, hipEvent_t).
using Event = void*;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* kind() const = 0;  // "host", "cuda", "hip"
  // Where ptr lives, as seen from this rank's device.
  virtual MemKind pointerKind(const void* ptr) const = 0;
  // pointerKind of a collective's buffer that hetccl hands on without
  // touching it (a one-group pass-through): a GPU runtime remembers the
  // last buffers it found to be this device's memory and answers for them
  // without asking the vendor runtime again (gpu_device.cc says when that
  // answer can be stale). Other pointers are asked every time.
  virtual MemKind bufferKind(const void* ptr) { return pointerKind(ptr); }
  // Memory the rank's collectives may use as buffers.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Copy in the order of `stream` (host: immediately). Any direction.
  virtual void copy(void* dst, const void* src, size_t bytes, Stream stream) = 0;
  // Whether work on this device completes before a call returns (host) or
  // is ordered on streams (GPUs: border steps then go through the proxy).
  virtual bool synchronous() const = 0;

  // The rest is for stream-ordered (GPU) runtimes; the host runtime throws
  // hetcclInternalError from them.
  virtual int deviceId() const { return -1; }
  // Binds the calling thread to this rank's device (the proxy thread calls it).
  virtual void makeCurrent() {}
  // Page-locked host memory, mapped for the device (staging, flags).
  virtual void* allocPinned(size_t bytes);
  virtual void freePinned(void* ptr);
  // A stream of hetccl's own, non-blocking towards the legacy default
  // stream. kHighest: at the device's greatest priority, so that the block
  // scheduler starts its kernels' blocks (the border's folds) ahead of
  // waiting blocks of normal streams' kernels (the application's compute)
  // instead of behind all of them; the default where the runtime has no
  // priorities.
  enum class Priority { kDefault, kHighest };
  virtual Stream createStream(Priority p = Priority::kDefault);
  // The stream's priority as the runtime numbers it (lower is greater; 0 is
  // the default), or 0 where it cannot tell.
  virtual int streamPriority(Stream) { return 0; }
  virtual void destroyStream(Stream s);
  virtual Event createEvent();
  // An event whose completion time is kept (for elapsedUs); destroyEvent frees it.
  virtual Event createTimedEvent();
  // Microseconds between the completions of two timed events (both done);
  // negative where the runtime cannot tell.
  virtual double elapsedUs(Event start, Event end);
  virtual void destroyEvent(Event e);
  virtual void recordEvent(Event e, Stream s);
  // true once all work before the record completed; throws on a device error.
  virtual bool eventDone(Event e);
  // Whether `s` is being captured into a graph (stream capture); false
  // where the runtime cannot say.
  virtual bool capturing(Stream) { return false; }
  // The stream's id, unique while the process lives (a destroyed stream's
  // handle may come back for a new stream; its id does not); 0 where the
  // runtime cannot tell (then only the handle names a stream).
  virtual uint64_t streamId(Stream) { return 0; }
  virtual void streamWaitEvent(Stream s, Event e);
  // Work enqueued on `s` after this call waits until *flag >= value, where
  // flag lives in allocPinned memory and the host stores it (the proxy's
  // completion signal). The caller's thread does not wait. CUDA compares
  // cyclically ((int64_t)(*flag - value) >= 0), HIP and the host fallback
  // as unsigned numbers: both agree only while flag and value stay below
  // 2^63, so flags count up from 0 and a release stores kFlagReleased.
  virtual void streamWaitValue(Stream s, volatile uint64_t* flag, uint64_t value);
  // Work enqueued on `s` after this call runs once `s` has stored `value` to
  // *flag (registered or pinned host memory), after all earlier work on `s`
  // completed and is visible to other processes reading that memory.
  virtual void streamWriteValue(Stream s, volatile uint64_t* flag, uint64_t value);
  // Whether streamWaitValue is a stream memory operation of the runtime
  // (else a host function that polls, which a graph cannot replay).
  virtual bool waitValueOnDevice() { return false; }
  // Runs fn(arg) on a runtime thread once `s` reaches it; on a capturing
  // stream, at every launch of the graph. fn must not call the runtime.
  virtual void launchHostFunc(Stream s, void (*fn)(void*), void* arg);
  // Ties destroy(arg) to the graph `s` is being captured into (a user
  // object the graph holds): it runs once the last graph or exec holding it
  // has gone and no launch of it still runs, on a runtime thread (it must
  // not call the runtime). false where the runtime cannot (no user objects,
  // or `s` is not capturing): then nothing is tied.
  virtual bool tieToCapture(Stream, void (*)(void*), void*) { return false; }
  // Page-locks and maps [ptr, ptr + bytes) of host memory allocated
  // elsewhere (a shared-memory segment) so that copies and stream memory
  // operations on this device can use it. May synchronise the device: call
  // it only where no stream waits on anything hetccl has still to do.
  virtual void registerHost(void* ptr, size_t bytes);
  virtual void unregisterHost(void* ptr);
  // The address at which kernels on this device reach registered or pinned
  // host memory.
  virtual void* devicePointer(void* host);
  // Which physical GPU this rank runs on (a hash of its PCI address; 0 where
  // not known), and whether MPS shares its contexts: two processes on one
  // GPU without MPS are two contexts the GPU time-slices, so a kernel that
  // waits for the other process's work waits out a time slice.
  virtual uint64_t physicalGpu() const { return 0; }
  virtual bool mpsShared() const { return false; }
};

// Waits for `e` by polling, bounded by timeoutS and the abort flag (throws a
// remote error naming `what` on timeout, hetcclInvalidUsage... on abort).
void waitEvent(DeviceRuntime& d, Event e, double timeoutS, const std::atomic<bool>* abort, const char* what);

// "host" is always there; throws InvalidArgument naming the known kinds.
std::unique_ptr<DeviceRuntime> createDeviceRuntime(const std::string& kind);
std::vector<std::string> deviceKinds();

}  // namespace hetccl
