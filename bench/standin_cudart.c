/* A CUDA runtime that does no device work and counts every call, for
 * hetccl-dropin-host-cost (bench/dropin_host_cost.cc): hetccl loads it as
 * HETCCL_CUDA_LIB, and the benchmark reads how many runtime calls hetccl
 * made per pass-through call (each costs 0.1-1 us on a real GPU).
 *
 * Its one device is device 0. Device memory is host memory from malloc,
 * recorded so that cudaPointerGetAttributes calls it device memory; streams
 * and events are distinct dummy handles; copies run at once; no stream is
 * ever captured. Nothing here is thread-safe beyond the counters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  kGetDeviceCount,
  kGetDevice,
  kSetDevice,
  kMalloc,
  kFree,
  kHostAlloc,
  kFreeHost,
  kHostGetDevicePointer,
  kMemcpyAsync,
  kStreamCreate,
  kStreamDestroy,
  kStreamSynchronize,
  kEventCreate,
  kEventDestroy,
  kEventRecord,
  kEventQuery,
  kStreamWaitEvent,
  kPointerGetAttributes,
  kLaunchHostFunc,
  kGetLastError,
  kStreamIsCapturing,
  kCaptureMode,
  kStreamGetId,
  kStreamPriority,
  kDeviceAttribute,
  kHostRegister,
  kOther,
  kNames
};

static const char* const names[kNames] = {"cudaGetDeviceCount",
                                          "cudaGetDevice",
                                          "cudaSetDevice",
                                          "cudaMalloc",
                                          "cudaFree",
                                          "cudaHostAlloc",
                                          "cudaFreeHost",
                                          "cudaHostGetDevicePointer",
                                          "cudaMemcpyAsync",
                                          "cudaStreamCreate*",
                                          "cudaStreamDestroy",
                                          "cudaStreamSynchronize",
                                          "cudaEventCreate*",
                                          "cudaEventDestroy",
                                          "cudaEventRecord",
                                          "cudaEventQuery",
                                          "cudaStreamWaitEvent",
                                          "cudaPointerGetAttributes",
                                          "cudaLaunchHostFunc",
                                          "cudaGetLastError",
                                          "cudaStreamIsCapturing",
                                          "cudaThreadExchangeStreamCaptureMode",
                                          "cudaStreamGetId",
                                          "cudaStream*Priority*",
                                          "cudaDeviceGet*",
                                          "cudaHost(Un)Register",
                                          "other"};

static unsigned long long counts[kNames];

static void count(int k) { __atomic_fetch_add(&counts[k], 1, __ATOMIC_RELAXED); }

/* The benchmark's view: the number of counters, each one's name and count. */
int standinCudartCounters(void) { return kNames; }
const char* standinCudartName(int k) { return k >= 0 && k < kNames ? names[k] : ""; }
unsigned long long standinCudartCount(int k) {
  return k >= 0 && k < kNames ? __atomic_load_n(&counts[k], __ATOMIC_RELAXED) : 0;
}

/* Device allocations, for pointer queries: a small table is enough for a
 * benchmark (cudaMalloc fails once it is full). */
enum { kMaxAllocs = 256 };
static struct {
  char* base;
  size_t bytes;
} allocs[kMaxAllocs];

static int used; /* allocs[0, used) have been handed out */

static int isDevice(const void* p) {
  for (int i = 0; i < used; ++i)
    if (allocs[i].base && (const char*)p >= allocs[i].base && (const char*)p < allocs[i].base + allocs[i].bytes)
      return 1;
  return 0;
}

static uintptr_t nextHandle = 0x1000;
static void* handle(void) { return (void*)__atomic_add_fetch(&nextHandle, 16, __ATOMIC_RELAXED); }

int cudaGetDeviceCount(int* n) {
  count(kGetDeviceCount);
  *n = 1;
  return 0;
}
int cudaGetDevice(int* d) {
  count(kGetDevice);
  *d = 0;
  return 0;
}
int cudaSetDevice(int d) {
  count(kSetDevice);
  return d == 0 ? 0 : 101; /* cudaErrorInvalidDevice */
}
int cudaMalloc(void** p, size_t bytes) {
  count(kMalloc);
  for (int i = 0; i < kMaxAllocs; ++i)
    if (!allocs[i].base) {
      allocs[i].base = calloc(1, bytes ? bytes : 1);
      allocs[i].bytes = bytes ? bytes : 1;
      if (i >= used) used = i + 1;
      *p = allocs[i].base;
      return allocs[i].base ? 0 : 2; /* cudaErrorMemoryAllocation */
    }
  return 2;
}
int cudaFree(void* p) {
  count(kFree);
  for (int i = 0; i < kMaxAllocs; ++i)
    if (p && allocs[i].base == p) {
      free(allocs[i].base);
      allocs[i].base = NULL;
    }
  return 0;
}
int cudaHostAlloc(void** p, size_t bytes, unsigned flags) {
  (void)flags;
  count(kHostAlloc);
  *p = calloc(1, bytes ? bytes : 1);
  return *p ? 0 : 2;
}
int cudaFreeHost(void* p) {
  count(kFreeHost);
  free(p);
  return 0;
}
int cudaHostGetDevicePointer(void** d, void* h, unsigned flags) {
  (void)flags;
  count(kHostGetDevicePointer);
  *d = h;
  return 0;
}
int cudaMemcpyAsync(void* dst, const void* src, size_t bytes, int kind, void* s) {
  (void)kind, (void)s;
  count(kMemcpyAsync);
  memmove(dst, src, bytes);
  return 0;
}
int cudaStreamCreateWithFlags(void** s, unsigned flags) {
  (void)flags;
  count(kStreamCreate);
  *s = handle();
  return 0;
}
int cudaStreamCreateWithPriority(void** s, unsigned flags, int priority) {
  (void)flags, (void)priority;
  count(kStreamCreate);
  *s = handle();
  return 0;
}
int cudaStreamDestroy(void* s) {
  (void)s;
  count(kStreamDestroy);
  return 0;
}
int cudaStreamSynchronize(void* s) {
  (void)s;
  count(kStreamSynchronize);
  return 0;
}
int cudaEventCreateWithFlags(void** e, unsigned flags) {
  (void)flags;
  count(kEventCreate);
  *e = handle();
  return 0;
}
int cudaEventDestroy(void* e) {
  (void)e;
  count(kEventDestroy);
  return 0;
}
int cudaEventRecord(void* e, void* s) {
  (void)e, (void)s;
  count(kEventRecord);
  return 0;
}
int cudaEventQuery(void* e) {
  (void)e;
  count(kEventQuery);
  return 0;
}
int cudaEventElapsedTime(float* ms, void* a, void* b) {
  (void)a, (void)b;
  count(kOther);
  *ms = 0;
  return 0;
}
int cudaStreamWaitEvent(void* s, void* e, unsigned flags) {
  (void)s, (void)e, (void)flags;
  count(kStreamWaitEvent);
  return 0;
}
/* cudaPointerAttributes' head: type (2 device, 0 unregistered), device. */
int cudaPointerGetAttributes(void* attr, const void* p) {
  count(kPointerGetAttributes);
  int head[2] = {isDevice(p) ? 2 : 0, 0};
  memcpy(attr, head, sizeof(head));
  return 0;
}
int cudaLaunchHostFunc(void* s, void (*fn)(void*), void* arg) {
  (void)s;
  count(kLaunchHostFunc);
  fn(arg);
  return 0;
}
int cudaGetLastError(void) {
  count(kGetLastError);
  return 0;
}
const char* cudaGetErrorString(int e) {
  count(kOther);
  return e == 0 ? "no error" : "stand-in runtime error";
}
int cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return 0;
}
int cudaHostRegister(void* p, size_t bytes, unsigned flags) {
  (void)p, (void)bytes, (void)flags;
  count(kHostRegister);
  return 0;
}
int cudaHostUnregister(void* p) {
  (void)p;
  count(kHostRegister);
  return 0;
}
int cudaStreamIsCapturing(void* s, int* status) {
  (void)s;
  count(kStreamIsCapturing);
  *status = 0;
  return 0;
}
int cudaThreadExchangeStreamCaptureMode(int* mode) {
  (void)mode;
  count(kCaptureMode);
  return 0;
}
int cudaStreamGetId(void* s, unsigned long long* id) {
  count(kStreamGetId);
  *id = (unsigned long long)(uintptr_t)s;
  return 0;
}
int cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  count(kStreamPriority);
  *least = 0;
  *greatest = -5;
  return 0;
}
int cudaStreamGetPriority(void* s, int* p) {
  (void)s;
  count(kStreamPriority);
  *p = 0;
  return 0;
}
int cudaDeviceGetPCIBusId(char* bus, int len, int dev) {
  (void)dev;
  count(kDeviceAttribute);
  strncpy(bus, "0000:00:00.0", (size_t)len);
  return 0;
}
int cudaDeviceGetAttribute(int* v, int attr, int dev) {
  (void)attr, (void)dev;
  count(kDeviceAttribute);
  *v = 0;
  return 0;
}
