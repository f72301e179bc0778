#include "device/event_pool.h"

namespace hetccl {

EventPool::~EventPool() {
  for (Event e : plain_) dev_.destroyEvent(e);
  for (Event e : timed_) dev_.destroyEvent(e);
}

Event EventPool::take(std::vector<Event>& pool, bool timed) {
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

void EventPool::give(std::vector<Event>& pool, Event e) {
  std::lock_guard<std::mutex> g(mu_);
  pool.push_back(e);
}

}  // namespace hetccl
