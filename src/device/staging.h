// What a GPU rank of a multi-group communicator keeps for its border steps:
// the proxy's internal stream, the completion flag the caller's streams wait
// on, a pool of events, and bounded pinned staging buffers and device
// scratch, reused from call to call.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "device/device.h"

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
class StagingState {
 public:
  // p: the priority of hetccl's own streams here (HETCCL_GPU_STREAM_PRIORITY).
  StagingState(DeviceRuntime& d, size_t stagingLimit, size_t scratchLimit, DeviceRuntime::Priority p);
  ~StagingState();
  StagingState(const StagingState&) = delete;
  StagingState& operator=(const StagingState&) = delete;

  Stream stream() const { return stream_; }
  // The completion flag: the proxy stores a call's ticket when it is done.
  volatile uint64_t* flag() const { return flag_; }
  uint64_t nextTicket() { return ++ticket_; }
  // Never lowers the flag (waits are for >= a ticket): a late completion
  // cannot hold back streams that releaseAll() let go.
  void complete(uint64_t ticket) {
    uint64_t cur = __atomic_load_n(flag_, __ATOMIC_ACQUIRE);
    while (cur < ticket &&
           !__atomic_compare_exchange_n(flag_, &cur, ticket, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
    }
  }
  // Abort: every stream that waits on this communicator goes on at once
  // (what it then copies out is not a result). This comes before anything
  // that synchronises the device (the vendor library's abort frees device
  // memory): a stream still waiting on the flag would hold that forever.
  void releaseAll() { complete(kFlagReleased); }

  Event takeEvent() { return take(events_, false); }
  void giveEvent(Event e) { give(events_, e); }
  // Events with timing (DeviceRuntime::createTimedEvent), a pool of their own.
  Event takeTimedEvent() { return take(timedEvents_, true); }
  void giveTimedEvent(Event e) { give(timedEvents_, e); }
  // Sampling of small calls (algorithm/device_border_call.h): 0 where this
  // enqueue is not timed, else the number of enqueues with small calls its
  // time stands for. One decision an enqueue (between newEnqueue calls),
  // at random gaps of 1 to 2 x every - 1 such enqueues (mean `every`), so
  // that no pattern of calls with a fixed period is always or never timed.
  // The enqueuing thread's.
  uint64_t sampleSmallCall(uint64_t every);
  // The border work of the next enqueue begins: its small calls share one
  // sampling decision. The enqueuing thread's.
  void newEnqueue() { sampleDecided_ = false; }

  StagingPool& pinned() { return pinned_; }
  // The end of the last staged call's copies out of pinned staging: its
  // stream records it (markReleased), and the next staged call's stream
  // waits for it (waitReleased) before copying into the same block. The
  // calling thread's alone.
  void markReleased(Stream s);
  void waitReleased(Stream s);
  StagingPool& scratch() { return scratch_; }

  // Calls queued on the proxy that will hand group steps to the vendor
  // library from its thread (staged calls; vendor calls routed after them,
  // algorithm/vendor_calls.h). While there are any, the enqueuing thread
  // routes its own vendor calls through the proxy too, so that the library
  // gets every rank's calls in one order.
  void stagedQueued() { staged_.fetch_add(1); }
  void stagedRan() { staged_.fetch_sub(1); }
  bool stagedPending() const { return staged_.load() > 0; }

  // Issue order: the communicator's calls run on the device in the order
  // they were issued, whatever caller streams they name, as NCCL orders
  // every launch of a communicator after the previous one (the border's
  // scratch, segments and staging serve one call at a time; a call may
  // read what the previous one wrote on another stream). A call (or group
  // call) runs on one lead stream, its first: leadAfterLast(streams) makes
  // the lead wait for the end of the last call where that ran on another
  // stream and for what is queued on the call's other streams, and returns
  // it; markLast(streams) records the call's end on the lead and makes the
  // other streams wait for it. One event record a call where every call
  // names one stream. A stream is the same as the last call's where its
  // handle and its id (DeviceRuntime::streamId) are: a handle alone may be
  // a destroyed stream's, come back for a new one. The calling thread's
  // alone.
  Stream leadAfterLast(const std::vector<Stream>& streams);
  void markLast(const std::vector<Stream>& streams);

  // Waits (polling, bounded) until the internal stream has run all its work.
  void sync(double timeoutS, const std::atomic<bool>* abort, const char* what);

 private:
  DeviceRuntime& dev_;
  Stream stream_ = nullptr;
  uint64_t* flag_ = nullptr;
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> staged_{0};
  std::mutex mu_;
  Event take(std::vector<Event>& pool, bool timed);  // from the pool, or a new one
  void give(std::vector<Event>& pool, Event e);
  std::vector<Event> events_, timedEvents_;
  Event released_ = nullptr;
  Event syncEvent_ = nullptr;
  Event lastEnd_ = nullptr;  // recorded on lastStream_ at the end of the last call
  Stream lastStream_ = nullptr;
  uint64_t lastId_ = 0, leadId_ = 0;  // DeviceRuntime::streamId of lastStream_, of the lead now
  bool hasLast_ = false;
  bool sampleDecided_ = false;  // for this enqueue: sampleWeight_
  uint64_t sampleWeight_ = 0, sampleGap_ = 0, sampleLeft_ = 0, sampleRng_ = 0x2545F4914F6CDD1Dull;
  StagingPool pinned_, scratch_;
};

}  // namespace hetccl
