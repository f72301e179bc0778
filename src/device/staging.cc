#include "device/staging.h"

#include "device/event_wait.h"

#include <string>

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace hetccl {

StagingPool::~StagingPool() {
  for (Slot& s : slots_) release(s);
  for (Slot& s : retired_) release(s);
}

void StagingPool::release(Slot& s) {
  if (!s.ptr) return;
  if (pinned_)
    dev_.freePinned(s.ptr);
  else
    dev_.free(s.ptr);
  held_ -= s.bytes;
  s = Slot{};
}

uint8_t* StagingPool::get(int slot, size_t bytes) {
  if (slot >= static_cast<int>(slots_.size())) slots_.resize(slot + 1);
  Slot& s = slots_[slot];
  if (s.bytes >= bytes && s.ptr) return s.ptr;
  // Double, so that outgrown blocks (kept, see above) sum to less than the
  // current one.
  size_t want = std::max(bytes, 2 * s.bytes);
  if (held_ + want > limit_) want = bytes;
  if (held_ + want > limit_)
    throwError(hetcclInvalidUsage, std::string(pinned_ ? "pinned staging" : "device scratch") + " of " +
                                       std::to_string(held_ + want) + " bytes would exceed " +
                                       (pinned_ ? "HETCCL_STAGING_MAX" : "HETCCL_DEVICE_SCRATCH_MAX") + " (" +
                                       std::to_string(limit_) + " bytes); raise it or use smaller calls");
  if (s.ptr) retired_.push_back(s);
  s = Slot{};
  s.ptr = static_cast<uint8_t*>(pinned_ ? dev_.allocPinned(want) : dev_.alloc(want));
  s.bytes = want;
  held_ += want;
  LOG_TRACE(kDevice, "%s slot %d: %zu bytes (%zu held)", pinned_ ? "pinned" : "device", slot, want, held_);
  return s.ptr;
}

StagingState::StagingState(DeviceRuntime& d, size_t stagingLimit, size_t scratchLimit, DeviceRuntime::Priority p)
    : dev_(d),
      events_(d),
      order_(d, events_),
      completion_(d),
      pinned_(d, stagingLimit, true),
      scratch_(d, scratchLimit, false),
      captured_(d) {
  stream_ = d.createStream(p);
  syncEvent_ = d.createEvent();
}

StagingState::~StagingState() {
  if (released_) dev_.destroyEvent(released_);
  dev_.destroyEvent(syncEvent_);
  dev_.destroyStream(stream_);
}

void StagingState::markReleased(Stream s) {
  if (!released_) released_ = dev_.createEvent();
  dev_.recordEvent(released_, s);
}

void StagingState::waitReleased(Stream s) {
  if (released_) dev_.streamWaitEvent(s, released_);
}

void StagingState::sync(double timeoutS, const std::atomic<bool>* abort, const char* what) {
  dev_.recordEvent(syncEvent_, stream_);
  waitEventChecked(dev_, syncEvent_, timeoutS, abort, what, waitCheck_);
}

}  // namespace hetccl
