// Device buffers for hetccl-perf ranks on GPUs (cuda, hip) or emulated GPUs
// (emu): memory, copies and one stream, through hetccl's own device helpers
// (hetcclDeviceAlloc...), so the tool links no vendor runtime.
#ifndef HETCCL_TOOLS_PERF_GPU_H_
#define HETCCL_TOOLS_PERF_GPU_H_

#include <cstddef>
#include <string>

namespace perf {

class Gpu {
 public:
  // Makes `device` of `kind` current on this thread; throws
  // std::runtime_error saying why when it cannot.
  Gpu(const std::string& kind, int device);
  const std::string& kind() const { return kind_; }
  int device() const { return device_; }
  void* stream() const { return stream_; }
  void* alloc(size_t bytes);
  void free(void* p);
  void toDevice(void* dst, const void* src, size_t bytes);  // synchronous
  void toHost(void* dst, const void* src, size_t bytes);    // synchronous
  void sync();                                              // waits for the tool's stream
  static int deviceCount(const std::string& kind);          // 0 when no runtime or device

 private:
  std::string kind_;
  int device_;
  void* stream_ = nullptr;
};

// Set on GPU ranks: the tool's own small collectives (barrier, maxima)
// then pass device memory.
Gpu* toolGpu();
void setToolGpu(Gpu* g);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_GPU_H_
