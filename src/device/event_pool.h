// Events of a GPU rank's communicator, reused from call to call: a border
// call records several, and creating them anew would cost a runtime call
// each. Plain events (ordering) and timed events (DeviceRuntime::
// createTimedEvent: the border's step times) are pooled apart. Any thread:
// the enqueuing thread takes them, the watcher gives them back.
#pragma once

#include <mutex>
#include <vector>

#include "device/device.h"

namespace hetccl {

class EventPool {
 public:
  explicit EventPool(DeviceRuntime& d) : dev_(d) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  Event take() { return take(plain_, false); }
  void give(Event e) { give(plain_, e); }
  Event takeTimed() { return take(timed_, true); }
  void giveTimed(Event e) { give(timed_, e); }

 private:
  Event take(std::vector<Event>& pool, bool timed);  // from the pool, or a new one
  void give(std::vector<Event>& pool, Event e);
  DeviceRuntime& dev_;
  std::mutex mu_;
  std::vector<Event> plain_, timed_;
};

}  // namespace hetccl
