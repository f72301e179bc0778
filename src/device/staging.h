// What a GPU rank of a multi-group communicator keeps for its calls across
// groups: the proxy's internal stream, the completion flag the caller's
// streams wait on, a pool of events, the issue order, and bounded pinned
// staging buffers and device scratch, reused from call to call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "device/call_sampler.h"
#include "device/captured_registry.h"
#include "device/completion_flag.h"
#include "device/device.h"
#include "device/event_pool.h"
#include "device/issue_order.h"

namespace hetccl {

// Pinned host buffers (or device scratch) in numbered slots, each grown on
// demand (doubling); the sum of all memory held may not exceed `limit`
// bytes (HETCCL_STAGING_MAX; HETCCL_DEVICE_SCRATCH_MAX for device memory). A block outgrown is not freed until the pool
// goes: cudaFreeHost/cudaFree synchronise the whole device, and the caller's stream may at that moment be waiting for
// the very job that frees, which would never finish. Not thread safe: the proxy thread alone uses it.
class StagingPool {
 public:
  StagingPool(DeviceRuntime& d, size_t limit, bool pinned) : dev_(d), limit_(limit), pinned_(pinned) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;
  // At least `bytes` in slot `slot`; contents are not kept when it grows.
  // Throws hetcclInvalidUsage naming the limit's setting when over it.
  uint8_t* get(int slot, size_t bytes);
  size_t held() const { return held_; }

 private:
  struct Slot {
    uint8_t* ptr = nullptr;
    size_t bytes = 0;
  };
  void release(Slot& s);
  DeviceRuntime& dev_;
  size_t limit_;
  bool pinned_;  // pinned host memory (else device memory)
  size_t held_ = 0;
  std::vector<Slot> slots_;
  std::vector<Slot> retired_;  // outgrown, freed with the pool
};

// The file's first paragraph: one per GPU rank of a multi-group communicator.
// Its parts: the events (event_pool.h), the issue order (issue_order.h), the
// completion flag of staged calls (completion_flag.h), the sampling of small
// calls' timing (call_sampler.h), the pinned staging and device scratch
// pools (above), and the proxy's own stream and count of staged calls.
class StagingState {
 public:
  // p: the priority of hetccl's own streams here (HETCCL_GPU_STREAM_PRIORITY).
  StagingState(DeviceRuntime& d, size_t stagingLimit, size_t scratchLimit, DeviceRuntime::Priority p);
  ~StagingState();
  StagingState(const StagingState&) = delete;
  StagingState& operator=(const StagingState&) = delete;

  // The proxy's internal stream (staged group steps, vendor calls handed over).
  Stream stream() const { return stream_; }
  EventPool& events() { return events_; }
  IssueOrder& order() { return order_; }
  CompletionFlag& completion() { return completion_; }
  SmallCallSampler& sampler() { return sampler_; }
  StagingPool& pinned() { return pinned_; }
  StagingPool& scratch() { return scratch_; }
  CapturedRegistry& captured() { return captured_; }
  // Abort: every stream that waits on this communicator goes on at once,
  // replays of its captured calls too.
  void releaseAll() {
    completion_.releaseAll();
    captured_.close();
  }

  // The end of the last staged call's copies out of pinned staging: its
  // stream records it (markReleased), and the next staged call's stream
  // waits for it (waitReleased) before copying into the same block. The
  // calling thread's alone.
  void markReleased(Stream s);
  void waitReleased(Stream s);

  // Calls queued on the proxy that will hand group steps to the vendor
  // library from its thread (staged calls; vendor calls routed after them,
  // gpu/vendor_calls.h). While there are any, the enqueuing thread
  // routes its own vendor calls through the proxy too, so that the library
  // gets every rank's calls in one order.
  void stagedQueued() { staged_.fetch_add(1); }
  void stagedRan() { staged_.fetch_sub(1); }
  bool stagedPending() const { return staged_.load() > 0; }

  // Waits (polling, bounded) until the internal stream has run all its work,
  // calling the wait check (if set) about every kWaitCheckEveryS: it throws
  // to end the wait (device/event_wait.h).
  void sync(double timeoutS, const std::atomic<bool>* abort, const char* what);
  // Set once, before the first call: the communicator's look at the ranks
  // on this host (comm/host_ranks.cc), which the vendor library's group
  // steps of a staged call wait for.
  void setWaitCheck(std::function<void()> check) { waitCheck_ = std::move(check); }

 private:
  DeviceRuntime& dev_;
  EventPool events_;  // before the parts that take from it
  IssueOrder order_;
  CompletionFlag completion_;
  SmallCallSampler sampler_;
  StagingPool pinned_, scratch_;
  CapturedRegistry captured_;
  Stream stream_ = nullptr;
  std::atomic<int> staged_{0};
  Event released_ = nullptr;
  Event syncEvent_ = nullptr;
  std::function<void()> waitCheck_;
};

}  // namespace hetccl
