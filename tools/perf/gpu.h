// GPU buffers for hetccl-perf ranks on CUDA devices: the CUDA runtime is
// loaded at run time (hetccl-perf runs on machines without one), and only
// what the tool needs is used: memory, copies and one stream.
#ifndef HETCCL_TOOLS_PERF_GPU_H_
#define HETCCL_TOOLS_PERF_GPU_H_

#include <cstddef>
#include <string>

namespace perf {

class Gpu {
 public:
  // Loads the CUDA runtime and makes `device` current on this thread; throws
  // std::runtime_error saying why when it cannot.
  explicit Gpu(int device);
  int device() const { return device_; }
  void* stream() const { return stream_; }
  void* alloc(size_t bytes);
  void free(void* p);
  void toDevice(void* dst, const void* src, size_t bytes);  // synchronous
  void toHost(void* dst, const void* src, size_t bytes);    // synchronous
  void sync();  // waits for the tool's stream
  static int deviceCount();  // 0 when no runtime or device

 private:
  int device_;
  void* stream_ = nullptr;
};

// Set on GPU ranks: the tool's own small collectives (barrier, maxima)
// then pass device memory.
Gpu* toolGpu();
void setToolGpu(Gpu* g);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_GPU_H_
