// The vendor library's calls that a GPU rank's enqueue makes from the
// calling thread: the device border's group steps, send/recv inside the
// group. Staged calls of the rank may still be queued on the proxy, which
// hands their group steps to the same library from its own thread, and the
// library must get every rank's calls in one order. So while any are
// queued (StagingState::stagedPending), a call, or a group of calls, goes
// through the proxy, after them: each stream it names records an event and
// waits for a ticket (a stream wait-value); the proxy issues the calls on
// its own stream behind those events (a device-side wait), waits for them
// (bounded by the timeout and abort) and stores the ticket, on failure and
// abort too.
// The same holds while this thread keeps the vendor library's own group
// open (OpenVendorGroup): the library launches what it is given only at
// that group's end, after the border steps that read its output. Otherwise
// the call goes to the library at once, on the stream it names. The
// calling thread waits for neither.
#pragma once

#include <functional>
#include <vector>

#include "backend/wrapping_backend.h"

namespace hetccl {

class Comm;

// While one lives, this thread holds the vendor library's group open (a
// group over several communicators, some of one group): VendorCalls made on
// this thread go through the proxy.
class OpenVendorGroup {
 public:
  OpenVendorGroup();
  ~OpenVendorGroup();
  OpenVendorGroup(const OpenVendorGroup&) = delete;
  OpenVendorGroup& operator=(const OpenVendorGroup&) = delete;
  static bool here();
};

class VendorCalls final : public WrappingBackend {
 public:
  explicit VendorCalls(Comm& c);
  void groupStart() override;
  void groupEnd() override;

 protected:
  // At once, held for the group, or through the proxy.
  void route(BackendCall call, Stream s) override;

 private:
  using Op = std::function<void(Backend&, Stream)>;
  // Whether a call (or group) made now goes through the proxy.
  bool defer() const;
  // Hands the held calls to the proxy (see the file's comment).
  void handOver();
  Comm& c_;
  int depth_ = 0;
  bool deferred_ = false;  // the open group goes through the proxy
  std::vector<Stream> streams_;
  std::vector<std::pair<size_t, Op>> held_;  // (index in streams_, call)
};

}  // namespace hetccl
