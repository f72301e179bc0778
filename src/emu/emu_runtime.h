/* The emulated GPU (device kind "emu"): a device runtime with the CUDA
 * runtime's shape, run on the CPU, so that groups of several GPUs run where
 * no GPU is (CI). libhetccl-emu.so; hetccl loads it as it loads libcudart.
 *
 * What it keeps of a GPU, where correctness depends on it:
 * - device memory of its own (emuMalloc), which emuPointerGetAttributes tells
 *   apart from host memory (so a host buffer on an emu rank is refused, as on
 *   CUDA), pinned host memory (emuHostAlloc) and registered host memory;
 * - streams whose work runs in order on a worker thread of each stream, after
 *   the call that enqueued it returned; events, stream waits on events and
 *   on a 64-bit value in memory, host functions;
 * - stream capture into graphs that launch again what was captured, user
 *   objects, and CUDA's rule on event queries during a capture (below);
 * - faults on demand (settings): copies slower than launches
 *   (HETCCL_EMU_COPY_DELAY_US), every stream operation late
 *   (HETCCL_EMU_STALL_US), an allocation that fails (HETCCL_EMU_FAIL_ALLOC:
 *   device or pinned host memory).
 * Device memory is this process's memory: there is no peer access between
 * processes (as between two vendors' GPUs).
 *
 * Error codes are the CUDA runtime's where it has one. */
#ifndef HETCCL_EMU_RUNTIME_H_
#define HETCCL_EMU_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int emuError_t;
#define emuSuccess 0
#define emuErrorInvalidValue 1
#define emuErrorMemoryAllocation 2
#define emuErrorInvalidDevice 101
#define emuErrorInvalidResourceHandle 400
#define emuErrorNotReady 600
#define emuErrorStreamCaptureUnsupported 900
#define emuErrorStreamCaptureInvalidated 901
#define emuErrorStreamCaptureMerge 902
#define emuErrorStreamCaptureUnmatched 903
#define emuErrorStreamCaptureUnjoined 904
#define emuErrorStreamCaptureIsolation 905
#define emuErrorStreamCaptureWrongThread 908
#define emuErrorUnknown 999

typedef struct emuStream* emuStream_t; /* NULL: the current device's default stream */
typedef struct emuEvent* emuEvent_t;
typedef struct emuGraph* emuGraph_t;
typedef struct emuGraphExec* emuGraphExec_t;
typedef struct emuUserObject* emuUserObject_t;

/* cudaPointerAttributes' head: type 0 unregistered host, 1 host (pinned or
 * registered), 2 device. */
typedef struct {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
} emuPointerAttributes;

emuError_t emuGetDeviceCount(int* count);
emuError_t emuGetDevice(int* device);
emuError_t emuSetDevice(int device);
emuError_t emuDeviceSynchronize(void);
emuError_t emuRuntimeGetVersion(int* version);
emuError_t emuGetLastError(void);
const char* emuGetErrorString(emuError_t e);

emuError_t emuMalloc(void** ptr, size_t bytes);
emuError_t emuFree(void* ptr);
emuError_t emuHostAlloc(void** ptr, size_t bytes, unsigned flags);
emuError_t emuFreeHost(void* ptr);
emuError_t emuHostGetDevicePointer(void** dptr, void* hptr, unsigned flags);
emuError_t emuHostRegister(void* ptr, size_t bytes, unsigned flags);
emuError_t emuHostUnregister(void* ptr);
emuError_t emuPointerGetAttributes(emuPointerAttributes* attr, const void* ptr);

/* kind is cudaMemcpyKind's; every direction is a plain copy here. */
emuError_t emuMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, emuStream_t stream);
emuError_t emuMemcpy(void* dst, const void* src, size_t bytes, int kind);

emuError_t emuStreamCreateWithFlags(emuStream_t* stream, unsigned flags);
emuError_t emuStreamDestroy(emuStream_t stream);
emuError_t emuStreamSynchronize(emuStream_t stream);
emuError_t emuStreamQuery(emuStream_t stream);
emuError_t emuEventCreateWithFlags(emuEvent_t* event, unsigned flags);
emuError_t emuEventDestroy(emuEvent_t event);
emuError_t emuEventRecord(emuEvent_t event, emuStream_t stream);
emuError_t emuEventQuery(emuEvent_t event);
emuError_t emuEventSynchronize(emuEvent_t event);
emuError_t emuStreamWaitEvent(emuStream_t stream, emuEvent_t event, unsigned flags);
/* Milliseconds between two completed events made without emuEventDisableTiming (0x2). */
emuError_t emuEventElapsedTime(float* ms, emuEvent_t start, emuEvent_t end);
emuError_t emuLaunchHostFunc(emuStream_t stream, void (*fn)(void*), void* arg);
/* Work enqueued after this waits until *(uint64_t*)addr >= value (flags 0),
 * as cuStreamWaitValue64 with CU_STREAM_WAIT_VALUE_GEQ. */
int emuStreamWaitValue64(emuStream_t stream, uint64_t addr, uint64_t value, unsigned flags);
/* Stores value to *(uint64_t*)addr once the stream's earlier work is done
 * (flags 0), as cuStreamWriteValue64. */
int emuStreamWriteValue64(emuStream_t stream, uint64_t addr, uint64_t value, unsigned flags);

/* Stream capture and graphs, as CUDA has them: work enqueued on a capturing
 * stream (copies, host functions, value writes and waits, kernel launches,
 * emuEnqueue, event records and waits) is recorded into the capture's graph
 * instead of run. A stream that waits on an event recorded in a capture
 * joins it (CUDA's cross-stream capture) and must be joined back (the
 * capture's first stream waits on an event recorded on it after its last
 * work) before EndCapture, which otherwise fails with
 * emuErrorStreamCaptureUnjoined; a capturing stream that waits on an event
 * recorded outside its capture invalidates it
 * (emuErrorStreamCaptureIsolation). EndCapture returns the graph;
 * emuGraphInstantiate makes an exec, and each emuGraphLaunch enqueues the
 * recorded work again in its order (the first stream's on the launch
 * stream, each joined stream's on a stream of the exec, the events between
 * them kept), launches of one exec one after the other. The capture status
 * of a stream (0 none, 1 active, 2 invalidated), the thread's capture mode
 * (0 global, 1 thread-local, 2 relaxed), and CUDA's rule that an event
 * query or synchronisation during a capture it forbids fails and
 * invalidates the capture. */
emuError_t emuStreamBeginCapture(emuStream_t stream, int mode);
emuError_t emuStreamEndCapture(emuStream_t stream, emuGraph_t* graph);
/* cudaStreamGetCaptureInfo_v2's shape (CUDA 12, HIP): status, the
 * capture's id and the graph being built; deps and numDeps are set to none. */
emuError_t emuStreamGetCaptureInfo(emuStream_t stream, int* status, unsigned long long* id, emuGraph_t* graph,
                                   const void** deps, size_t* numDeps);
emuError_t emuGraphInstantiate(emuGraphExec_t* exec, emuGraph_t graph, unsigned long long flags);
emuError_t emuGraphInstantiateWithFlags(emuGraphExec_t* exec, emuGraph_t graph, unsigned long long flags);
emuError_t emuGraphLaunch(emuGraphExec_t exec, emuStream_t stream);
/* Work launched before still runs. */
emuError_t emuGraphExecDestroy(emuGraphExec_t exec);
emuError_t emuGraphDestroy(emuGraph_t graph);
/* User objects (cudaUserObjectCreate's shape; flags must be 1,
 * cudaUserObjectNoDestructorSync): `destroy(ptr)` runs once the last
 * reference goes. A graph holds references (emuGraphRetainUserObject; flags
 * 1, cudaGraphUserObjectMove, passes the caller's), an exec holds its
 * graph's, and a launch holds them until its work has run. The destructor
 * runs on the thread that drops the last reference (a stream's worker, or
 * the caller of a destroy or release); like CUDA's it must not call the
 * runtime. */
emuError_t emuUserObjectCreate(emuUserObject_t* obj, void* ptr, void (*destroy)(void*), unsigned initialRefcount,
                               unsigned flags);
emuError_t emuUserObjectRetain(emuUserObject_t obj, unsigned count);
emuError_t emuUserObjectRelease(emuUserObject_t obj, unsigned count);
emuError_t emuGraphRetainUserObject(emuGraph_t graph, emuUserObject_t obj, unsigned count, unsigned flags);
emuError_t emuGraphReleaseUserObject(emuGraph_t graph, emuUserObject_t obj, unsigned count);
emuError_t emuStreamIsCapturing(emuStream_t stream, int* status);
emuError_t emuThreadExchangeStreamCaptureMode(int* mode);
/* A stream's id, unique for the process's life (cudaStreamGetId). */
emuError_t emuStreamGetId(emuStream_t stream, unsigned long long* id);
/* Stream priorities as CUDA numbers them (lower is greater): the range is
 * [kEmuGreatestPriority, kEmuLeastPriority], a value outside it is clamped,
 * and emuStreamCreateWithFlags makes streams of priority 0. Emu keeps and
 * reports a stream's priority; it does not schedule by it (every stream runs
 * on a worker of its own, so no stream's work waits for another's room). */
#define kEmuGreatestPriority (-5)
#define kEmuLeastPriority 0
emuError_t emuStreamCreateWithPriority(emuStream_t* stream, unsigned flags, int priority);
emuError_t emuDeviceGetStreamPriorityRange(int* least, int* greatest);
emuError_t emuStreamGetPriority(emuStream_t stream, int* priority);

#ifdef __cplusplus
}

#include <functional>
/* C++ callers (the emu kernels plugin, the emu group library): any callable
 * as the next operation of `stream`. */
emuError_t emuEnqueue(emuStream_t stream, std::function<void()> work);
/* A launch of `kernel` (its address names it). With HETCCL_EMU_LAZY_LOADING
 * set, the process's first launch of a kernel not loaded yet first waits
 * until every stream of the device is idle, as a lazy load of a real GPU
 * runtime may. */
emuError_t emuLaunchKernel(const void* kernel, emuStream_t stream, std::function<void()> work);
/* Loads `kernel` now (as querying its attributes does on a GPU): its first
 * launch then waits for nothing (unless HETCCL_EMU_LAZY_LOADING is 2). */
emuError_t emuLoadKernel(const void* kernel);
#endif

#endif /* HETCCL_EMU_RUNTIME_H_ */
