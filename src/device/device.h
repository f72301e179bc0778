// Device runtime interface: the memory and ordering primitives of one device
// kind (host, cuda, hip), behind which hetccl never names a vendor API.
// The host runtime is built in; GPU runtimes are loaded at run time where
// their driver exists, so one build serves NVIDIA, AMD and CPU nodes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace hetccl {

// An opaque vendor stream (cudaStream_t, hipStream_t); null on host ranks.
using Stream = void*;

enum class MemKind { kHost, kPinnedHost, kDevice, kOtherDevice, kUnknown };
const char* memKindName(MemKind k);

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* kind() const = 0;  // "host", "cuda", "hip"
  // Where ptr lives, as seen from this rank's device.
  virtual MemKind pointerKind(const void* ptr) const = 0;
  // Memory the rank's collectives may use as buffers.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Copy in the order of `stream` (host: immediately).
  virtual void copy(void* dst, const void* src, size_t bytes, Stream stream) = 0;
  // Whether work on this device completes before a call returns (host) or
  // is ordered on streams (GPUs: border steps then go through the proxy).
  virtual bool synchronous() const = 0;
};

// "host" is always there; throws InvalidArgument naming the known kinds.
std::unique_ptr<DeviceRuntime> createDeviceRuntime(const std::string& kind);
std::vector<std::string> deviceKinds();

}  // namespace hetccl
