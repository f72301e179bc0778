// The flag in pinned memory by which the caller's streams wait for the
// proxy's part of a staged call (and of vendor calls handed to the proxy):
// each such call takes the next ticket, its streams wait until the flag
// holds it (a stream wait-value), and the proxy stores it from the CPU once
// the call is done, on failure and abort too.
#pragma once

#include <atomic>
#include <cstdint>

#include "device/device.h"

namespace hetccl {

class CompletionFlag {
 public:
  explicit CompletionFlag(DeviceRuntime& d);
  ~CompletionFlag();
  CompletionFlag(const CompletionFlag&) = delete;
  CompletionFlag& operator=(const CompletionFlag&) = delete;

  volatile uint64_t* flag() const { return flag_; }
  uint64_t nextTicket() { return ++ticket_; }
  // Never lowers the flag (waits are for >= a ticket): a late completion
  // cannot hold back streams that releaseAll() let go.
  void complete(uint64_t ticket);
  // Abort: every stream that waits on the flag goes on at once (what it then
  // copies out is not a result). This comes before anything that
  // synchronises the device (the vendor library's abort frees device
  // memory): a stream still waiting on the flag would hold that forever.
  void releaseAll() { complete(kFlagReleased); }

 private:
  DeviceRuntime& dev_;
  uint64_t* flag_ = nullptr;
  std::atomic<uint64_t> ticket_{0};
};

}  // namespace hetccl
