// The stream on which the proxy enqueues a GPU call's device work after the
// calling thread has returned from the call, and the flag by which the
// call's own streams wait for that work (algorithm/proxy_launch.h drives
// both). The calling thread takes a ticket, records where each of the
// call's streams stands (an event) and makes each wait until the flag holds
// the ticket (a stream wait-value); the proxy makes this stream wait for
// those events, enqueues the work here, and has this stream store the
// ticket after it (a stream write-value). So the calling thread enqueues
// two operations a stream whatever the call's size, and the work runs on a
// stream of hetccl's own (at the device's greatest priority by default:
// HETCCL_GPU_STREAM_PRIORITY), not behind the application's kernels.
//
// Tickets count up from 1 and the stream stores them in order, so the flag
// only grows while the device works; a release stores kFlagReleased, which
// ends every wait (a later store of an earlier ticket lowers it again, but
// the stores that follow it go on up to the last ticket given out, so every
// wait still ends once this stream has done its work).
#pragma once

#include <atomic>
#include <cstdint>

#include "device/device.h"

namespace hetccl {

class LaunchStream {
 public:
  LaunchStream(DeviceRuntime& d, DeviceRuntime::Priority p);
  ~LaunchStream();
  LaunchStream(const LaunchStream&) = delete;
  LaunchStream& operator=(const LaunchStream&) = delete;

  Stream stream() const { return stream_; }
  volatile uint64_t* flag() const { return flag_; }
  // The calling thread's.
  uint64_t nextTicket() { return ++ticket_; }
  // The stream stores `ticket` once its work before it is done: the proxy,
  // after a launch's work (also after the part of it enqueued before a
  // failure, and for a launch it dropped).
  void store(uint64_t ticket);
  // The CPU raises the flag to `ticket` (never lowers it): where the stream
  // cannot store (the device failed).
  void complete(uint64_t ticket);
  // Abort and failure: every wait on the flag ends at once.
  void releaseAll() { complete(kFlagReleased); }

 private:
  DeviceRuntime& dev_;
  Stream stream_ = nullptr;
  uint64_t* flag_ = nullptr;
  std::atomic<uint64_t> ticket_{0};
};

}  // namespace hetccl
