/* C ABI of hetccl's device reduction kernels plugin
 * (libhetccl-cuda-kernels.so, libhetccl-hip-kernels.so), built from one
 * source (reduce_kernels.cu) by nvcc or hipcc and dlopen'ed by the host
 * library (src/device/kernels.h) only where that GPU runtime exists.
 * Plain C: no CUDA or HIP header is needed to use it.
 *
 * History
 *   version 1: reduce, scale, divide, lastError.
 */
#ifndef HETCCL_KERNELS_API_H_
#define HETCCL_KERNELS_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HETCCL_KERNELS_API_VERSION 1
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
} hetcclKernelsApi_t;

/* The one exported symbol: the table for `version`, or NULL when the plugin
 * does not implement that version. */
const hetcclKernelsApi_t* hetcclKernelsGetApi(int version);
typedef const hetcclKernelsApi_t* (*hetcclKernelsGetApi_t)(int version);

#ifdef __cplusplus
}
#endif

#endif /* HETCCL_KERNELS_API_H_ */
