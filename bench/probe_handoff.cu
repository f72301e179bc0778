// Probe: what one hand-off between two processes' GPU streams costs, by the
// primitives the device border uses (stream memory operations on a shared
// segment registered in both processes, copies, a small kernel). Two
// processes on one GPU are two contexts: this shows which primitive makes
// the GPU switch between them.
//
//   nvcc -O2 -o probe_handoff bench/probe_handoff.cu -lcuda && ./probe_handoff [iterations]
// Prints one line per mode: "handoff <mode> us_per_round=<t>" where a round
// is one store by each process and one wait for the other's store. The
// copy modes run with copies of 8, 1024, 1025, 2048 and 4096 bytes: device
// to host and host to device, one direction small at a time, and the host
// to device leg through device scratch (a copy engine write of at least
// 2 KiB, then a device-to-device copy of the small size), batched with the
// overlap hint, as a 2D copy, and from the mapped device address.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(x)                                                               \
  do {                                                                      \
    auto r_ = (x);                                                          \
    if (r_ != 0) {                                                          \
      fprintf(stderr, "%s failed: %d at line %d\n", #x, (int)r_, __LINE__); \
      exit(2);                                                              \
    }                                                                       \
  } while (0)

__global__ void addOne(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

struct Shared {
  volatile uint64_t flag[2][16];  // one cache line each
  volatile uint64_t go;
  char data[2][8192];
};

enum Mode {
  kFlags,
  kFlagsKernel,
  kFlagsCopies,
  kFull,
  kFullTwoStreams,
  kSmallD2H,
  kSmallH2D,
  kViaScratch,
  kH2DBatch,
  kH2D2D,
  kH2DMapped,
  kModes
};
const char* kNames[] = {"flags",         "flags+kernel",           "flags+copies",
                        "copies+kernel", "copies+kernel_2streams", "small_d2h",
                        "small_h2d",     "h2d_via_scratch",        "small_h2d_batch_overlap",
                        "small_h2d_2d",  "small_h2d_from_mapped"};

// The host to device leg of the small-copy modes: plain, batched with the
// overlap-with-compute hint, as a 2D copy, or as a device-to-device copy
// from the host buffer's mapped device address.
void copyIn(Mode mode, void* dst, void* src, size_t n, cudaStream_t s) {
  if (mode == kH2DBatch) {
    cudaMemcpyAttributes at{};
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    at.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t idx = 0;
    void* d[1] = {dst};
    const void* sr[1] = {src};
    CK(cudaMemcpyBatchAsync(d, sr, &n, 1, &at, &idx, 1, s));
  } else if (mode == kH2D2D) {
    CK(cudaMemcpy2DAsync(dst, n, src, n, n, 1, cudaMemcpyHostToDevice, s));
  } else if (mode == kH2DMapped) {
    CUdeviceptr p;
    CK(cuMemHostGetDevicePointer(&p, src, 0));
    CK(cudaMemcpyAsync(dst, reinterpret_cast<void*>(p), n, cudaMemcpyDeviceToDevice, s));
  } else {
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
  }
}
constexpr size_t kBig = 2048;

double run(Shared* sh, int me, Mode mode, int iters, uint64_t base, size_t small) {
  cudaStream_t s, s2;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  float* dev = nullptr;
  CK(cudaMalloc(&dev, 16384));
  CK(cudaMemset(dev, 0, 16384));
  char* scratch = reinterpret_cast<char*>(dev) + 8192;
  CUdeviceptr mine, peer;
  CK(cuMemHostGetDevicePointer(&mine, (void*)&sh->flag[me][0], 0));
  CK(cuMemHostGetDevicePointer(&peer, (void*)&sh->flag[1 - me][0], 0));
  CK(cudaDeviceSynchronize());
  // Start together.
  __atomic_add_fetch(&sh->go, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&sh->go, __ATOMIC_SEQ_CST) < base + 2) {
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= iters; ++i) {
    uint64_t v = base * 1000000 + i;
    const bool copies = mode != kFlags && mode != kFlagsKernel;
    const size_t out = mode >= kSmallH2D ? kBig : small;
    const size_t in = mode == kSmallD2H || mode == kViaScratch ? kBig : small;
    if (copies) CK(cudaMemcpyAsync(sh->data[me], dev, out, cudaMemcpyDeviceToHost, s));
    CK(cuStreamWriteValue64((CUstream)s, mine, v, 0));
    CK(cuStreamWaitValue64((CUstream)s, peer, v, CU_STREAM_WAIT_VALUE_GEQ));
    if (copies)
      copyIn(mode, mode == kViaScratch ? scratch : reinterpret_cast<char*>(dev) + 4096,
             const_cast<char*>(sh->data[1 - me]), in, s);
    if (mode == kViaScratch)
      CK(cudaMemcpyAsync(reinterpret_cast<char*>(dev) + 4096, scratch, small, cudaMemcpyDeviceToDevice, s));
    if (mode == kFlagsKernel || mode == kFull) addOne<<<1, 32, 0, s>>>(dev, 2);
    if (mode == kFullTwoStreams) {
      CK(cudaEventRecord(ev, s));
      CK(cudaStreamWaitEvent(s2, ev, 0));
      addOne<<<1, 32, 0, s2>>>(dev, 2);
      CK(cudaEventRecord(ev, s2));
      CK(cudaStreamWaitEvent(s, ev, 0));
    }
  }
  CK(cudaStreamSynchronize(s));
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  cudaFree(dev);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaStreamDestroy(s2);
  return us;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 2000;
  auto* sh =
      static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  memset(sh, 0, sizeof(Shared));
  pid_t child = fork();
  const int me = child == 0 ? 1 : 0;
  CK(cudaSetDevice(0));
  CK(cudaHostRegister(sh, sizeof(Shared), cudaHostRegisterMapped | cudaHostRegisterPortable));
  const size_t sizes[] = {8, 1024, 1025, 2048, 4096};
  uint64_t base = 0;
  for (int m = 0; m < kModes; ++m) {
    const bool sized = m != kFlags && m != kFlagsKernel;
    for (size_t small : sizes) {
      double us = run(sh, me, static_cast<Mode>(m), iters, base, small);
      base += 2;
      if (me == 0) printf("handoff %s bytes=%zu us_per_round=%.2f\n", kNames[m], small, us);
      if (!sized) break;
    }
  }
  CK(cudaHostUnregister(sh));
  if (child) waitpid(child, nullptr, 0);
  return 0;
}
