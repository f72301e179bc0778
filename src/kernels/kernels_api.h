/* C ABI of hetccl's device reduction kernels plugin
 * (libhetccl-cuda-kernels.so, libhetccl-hip-kernels.so), built from one
 * source (reduce_kernels.cu) by nvcc or hipcc and dlopen'ed by the host
 * library (src/device/kernels_plugin.h) only where that GPU runtime exists.
 * Plain C: no CUDA or HIP header is needed to use it.
 *
 * History
 *   version 1: reduce, scale, divide, lastError.
 *   version 2: borderRound.
 *   version 3: preload.
 */
#ifndef HETCCL_KERNELS_API_H_
#define HETCCL_KERNELS_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HETCCL_KERNELS_API_VERSION 3
#define HETCCL_KERNELS_GET_API_SYMBOL "hetcclKernelsGetApi"

/* Return codes of the entries; the values are hetcclResult_t's. */
#define HETCCL_KERNELS_SUCCESS 0
#define HETCCL_KERNELS_DEVICE_ERROR 1     /* hetcclUnhandledDeviceError: a launch failed */
#define HETCCL_KERNELS_INVALID_ARGUMENT 4 /* hetcclInvalidArgument: dtype, op, pointer, count */

/* dtype: hetcclDataType_t values (int8 0, uint8 1, int32 2, uint32 3, int64 4,
 * uint64 5, float16 6, float32 7, float64 8, bfloat16 9, fp8 e4m3 10,
 * fp8 e5m2 11). op: sum 0, prod 1, max 2, min 3.
 * Every entry only enqueues work on `stream` (a cudaStream_t or hipStream_t;
 * null is the legacy default stream) and never synchronises. count is in
 * elements; pointers are device-accessible memory. On a nonzero return,
 * lastError() gives the text (per calling thread). */
/* One round of the device border's latency path (src/border/device_border.h)
 * between `peers` border peers: every pointer is the device address of
 * mapped host memory shared by their processes. Flags are 64-bit counters;
 * a wait for value v on flag f ends once f >= v both as unsigned numbers and
 * as (int64_t)(f - v) >= 0, as the stream waits of either vendor end (a
 * release stores 2^62, which ends every wait). */
#define HETCCL_BORDER_ROUND_MAX_PEERS 8
typedef struct {
  int peers;                                                 /* 2 .. HETCCL_BORDER_ROUND_MAX_PEERS */
  int me;                                                    /* this rank's index among them */
  unsigned long long seq;                                    /* the slot use: stored into ready[me] and ackOut[q] */
  unsigned long long slotFree;                               /* wait ackIn[q] >= slotFree first (0: no wait) */
  void* out[HETCCL_BORDER_ROUND_MAX_PEERS];                  /* each peer's outgoing data of this slot */
  unsigned long long* ready[HETCCL_BORDER_ROUND_MAX_PEERS];  /* each peer's ready flag of this slot */
  unsigned long long* ackIn[HETCCL_BORDER_ROUND_MAX_PEERS];  /* reader q's ack of this rank's slot */
  unsigned long long* ackOut[HETCCL_BORDER_ROUND_MAX_PEERS]; /* this rank's ack of peer q's slot */
} hetcclBorderRound_t;

typedef struct {
  int version;      /* HETCCL_KERNELS_API_VERSION */
  const char* kind; /* "cuda", "hip" or "emu" */
  /* dst[i] = a[i] op b[i]; dst may be a or b. Integers wrap; max/min: a NaN
   * operand wins; float16/bfloat16/fp8 combine in float and round once to
   * nearest-even (fp8 saturates to the largest finite), bit for bit as the
   * host reference (src/elements/host_reduce.cc). */
  int (*reduce)(void* dst, const void* a, const void* b, size_t count, int dtype, int op, void* stream);
  /* dst[i] = src[i] * scalar, floating types only (float32 and narrower use
   * (float)scalar); integer types return HETCCL_KERNELS_INVALID_ARGUMENT. */
  int (*scale)(void* dst, const void* src, size_t count, int dtype, double scalar, void* stream);
  /* buf[i] /= divisor, integer types only, truncating as C's / on the type. */
  int (*divide)(void* buf, size_t count, int dtype, int divisor, void* stream);
  const char* (*lastError)(void);
  /* One kernel: waits until every reader freed this rank's slot, copies
   * src[0, count) to out[me], stores seq into ready[me], waits for every
   * peer's ready[q] >= seq, writes dst[i] = v(0)[i] op ... op v(peers-1)[i]
   * left to right (v(me) = src, v(q) = out[q]; bit for bit as reduce()
   * applied in that order; dst may be src), then stores seq into ackOut[q]
   * for every q != me. The stores are visible to the other processes before
   * the flag that announces them. */
  int (*borderRound)(const hetcclBorderRound_t* round, void* dst, const void* src, size_t count, int dtype, int op,
                     void* stream);
  /* Loads every kernel of the plugin into the current device's context now,
   * launching nothing. The runtime loads a kernel lazily at its first launch
   * by default (CUDA_MODULE_LOADING=LAZY), and loading can wait for the
   * device's streams: a first launch behind a stream that waits on a flag
   * which this thread stores only later would never return. The host library
   * calls it at communicator init, before any of its streams waits. */
  int (*preload)(void);
} hetcclKernelsApi_t;

/* The one exported symbol: the table for `version`, or NULL when the plugin
 * does not implement that version. */
const hetcclKernelsApi_t* hetcclKernelsGetApi(int version);
typedef const hetcclKernelsApi_t* (*hetcclKernelsGetApi_t)(int version);

#ifdef __cplusplus
}
#endif

#endif /* HETCCL_KERNELS_API_H_ */
