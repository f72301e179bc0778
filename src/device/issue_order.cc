#include "device/issue_order.h"

namespace hetccl {

IssueOrder::IssueOrder(DeviceRuntime& d, EventPool& events) : dev_(d), events_(events) { lastEnd_ = d.createEvent(); }

IssueOrder::~IssueOrder() { dev_.destroyEvent(lastEnd_); }

Stream IssueOrder::leadAfterLast(const std::vector<Stream>& streams) {
  const Stream lead = streams.front();
  leadId_ = dev_.streamId(lead);
  // The same stream where handle and id are the same; where the runtime
  // has no ids, a handle alone may be a new stream's: the wait then always.
  if (hasLast_ && (lastStream_ != lead || leadId_ == 0 || leadId_ != lastId_)) dev_.streamWaitEvent(lead, lastEnd_);
  if (streams.size() > 1) {
    // The wait takes the record made last, so one event serves every
    // stream in turn.
    Event e = events_.take();
    try {
      for (size_t i = 1; i < streams.size(); ++i) {
        dev_.recordEvent(e, streams[i]);
        dev_.streamWaitEvent(lead, e);
      }
    } catch (...) {
      events_.give(e);
      throw;
    }
    events_.give(e);
  }
  return lead;
}

void IssueOrder::markLast(const std::vector<Stream>& streams) {
  dev_.recordEvent(lastEnd_, streams.front());
  lastStream_ = streams.front();
  lastId_ = leadId_;
  hasLast_ = true;
  for (size_t i = 1; i < streams.size(); ++i) dev_.streamWaitEvent(streams[i], lastEnd_);
}

}  // namespace hetccl
