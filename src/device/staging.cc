#include "device/staging.h"

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
    : dev_(d), pinned_(d, stagingLimit, true), scratch_(d, scratchLimit, false) {
  stream_ = d.createStream(p);
  flag_ = static_cast<uint64_t*>(d.allocPinned(sizeof(uint64_t)));
  *flag_ = 0;
  syncEvent_ = d.createEvent();
  lastEnd_ = d.createEvent();
}

StagingState::~StagingState() {
  for (Event e : events_) dev_.destroyEvent(e);
  for (Event e : timedEvents_) dev_.destroyEvent(e);
  if (released_) dev_.destroyEvent(released_);
  dev_.destroyEvent(syncEvent_);
  dev_.destroyEvent(lastEnd_);
  dev_.freePinned(flag_);
  dev_.destroyStream(stream_);
}

Event StagingState::take(std::vector<Event>& pool, bool timed) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!pool.empty()) {
      Event e = pool.back();
      pool.pop_back();
      return e;
    }
  }
  return timed ? dev_.createTimedEvent() : dev_.createEvent();
}

void StagingState::give(std::vector<Event>& pool, Event e) {
  std::lock_guard<std::mutex> g(mu_);
  pool.push_back(e);
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
  waitEvent(dev_, syncEvent_, timeoutS, abort, what);
}

uint64_t StagingState::sampleSmallCall(uint64_t every) {
  if (sampleDecided_) return sampleWeight_;
  if (every < 2) return sampleWeight_ = 1;  // every call
  sampleDecided_ = true;
  auto draw = [&] {  // xorshift64: 1 .. 2 x every - 1
    sampleRng_ ^= sampleRng_ << 13;
    sampleRng_ ^= sampleRng_ >> 7;
    sampleRng_ ^= sampleRng_ << 17;
    return 1 + sampleRng_ % (2 * every - 1);
  };
  if (sampleLeft_ == 0) sampleGap_ = sampleLeft_ = draw();
  sampleWeight_ = --sampleLeft_ == 0 ? sampleGap_ : 0;
  return sampleWeight_;
}

Stream StagingState::leadAfterLast(const std::vector<Stream>& streams) {
  const Stream lead = streams.front();
  leadId_ = dev_.streamId(lead);
  // The same stream where handle and id are the same; where the runtime
  // has no ids, a handle alone may be a new stream's: the wait then always.
  if (hasLast_ && (lastStream_ != lead || leadId_ == 0 || leadId_ != lastId_)) dev_.streamWaitEvent(lead, lastEnd_);
  if (streams.size() > 1) {
    // The wait takes the record made last, so one event serves every
    // stream in turn.
    Event e = takeEvent();
    try {
      for (size_t i = 1; i < streams.size(); ++i) {
        dev_.recordEvent(e, streams[i]);
        dev_.streamWaitEvent(lead, e);
      }
    } catch (...) {
      giveEvent(e);
      throw;
    }
    giveEvent(e);
  }
  return lead;
}

void StagingState::markLast(const std::vector<Stream>& streams) {
  dev_.recordEvent(lastEnd_, streams.front());
  lastStream_ = streams.front();
  lastId_ = leadId_;
  hasLast_ = true;
  for (size_t i = 1; i < streams.size(); ++i) dev_.streamWaitEvent(streams[i], lastEnd_);
}

}  // namespace hetccl
