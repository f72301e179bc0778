// What a GPU rank of a multi-group communicator keeps of its calls captured
// into graphs (gpu/captured_call.h), beside the calls themselves, which
// their graphs own: the flags their streams wait on (an abort releases
// them), whether a replay may still hand a call to the proxy, whether a call
// was ever captured, and the pinned blocks of calls gone, kept for the next
// calls and freed with the registry: a graph's destructor runs on a runtime
// thread, which must not call the runtime, and freeing pinned memory on the
// calling thread would wait for the whole device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "device/device.h"

namespace hetccl {

class CapturedRegistry {
 public:
  struct Shared {
    std::mutex mu;
    bool open = true;   // false once aborted or closed: a replay's hand-off then releases its stream at once
    bool gone = false;  // the registry (and the runtime) went: blocks can no longer be freed
    std::set<volatile uint64_t*> flags;
    // Pinned blocks of calls gone, by size, for the next calls: a call
    // takes the smallest that fits, so their number stays at the most that
    // were live at once for each size.
    std::multimap<size_t, void*> spare;
    // A call of this communicator was captured: from then on every call
    // hands off (gpu/captured_call.h). Never reset: when a graph's calls
    // go is up to the runtime and differs between ranks, and the ranks
    // must choose every call's path alike.
    bool captureSeen = false;
  };

  explicit CapturedRegistry(DeviceRuntime& d) : dev_(d), shared_(std::make_shared<Shared>()) {}
  ~CapturedRegistry();
  CapturedRegistry(const CapturedRegistry&) = delete;
  CapturedRegistry& operator=(const CapturedRegistry&) = delete;

  const std::shared_ptr<Shared>& shared() const { return shared_; }
  // Abort or the communicator's end: every flag holds kFlagReleased, and
  // every later hand-off stores it instead of reaching the proxy.
  void close();
  // A spare block of at least `bytes` (its size in *got), or null.
  void* takeSpare(size_t bytes, size_t* got);
  bool captureSeen() const;

 private:
  DeviceRuntime& dev_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace hetccl
