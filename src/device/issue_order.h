// Issue order: a communicator's calls run on the device in the order they
// were issued, whatever caller streams they name, as NCCL orders every
// launch of a communicator after the previous one (the border's scratch,
// segments and staging serve one call at a time; a call may read what the
// previous one wrote on another stream). A call (or group call) runs on one
// lead stream, its first: leadAfterLast(streams) makes the lead wait for
// the end of the last call where that ran on another stream and for what is
// queued on the call's other streams, and returns it; markLast(streams)
// records the call's end on the lead and makes the other streams wait for
// it. One event record a call where every call names one stream. A stream
// is the same as the last call's where its handle and its id
// (DeviceRuntime::streamId) are: a handle alone may be a destroyed
// stream's, come back for a new one. The calling thread's alone.
#pragma once

#include <cstdint>
#include <vector>

#include "device/device.h"
#include "device/event_pool.h"

namespace hetccl {

class IssueOrder {
 public:
  IssueOrder(DeviceRuntime& d, EventPool& events);
  ~IssueOrder();
  IssueOrder(const IssueOrder&) = delete;
  IssueOrder& operator=(const IssueOrder&) = delete;

  Stream leadAfterLast(const std::vector<Stream>& streams);
  void markLast(const std::vector<Stream>& streams);

 private:
  DeviceRuntime& dev_;
  EventPool& events_;
  Event lastEnd_ = nullptr;  // recorded on lastStream_ at the end of the last call
  Stream lastStream_ = nullptr;
  uint64_t lastId_ = 0, leadId_ = 0;  // DeviceRuntime::streamId of lastStream_, of the lead now
  bool hasLast_ = false;
};

}  // namespace hetccl
