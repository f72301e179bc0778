#include "gpu/vendor_calls.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

namespace {
thread_local int tOpenVendorGroups = 0;
}  // namespace

OpenVendorGroup::OpenVendorGroup() { ++tOpenVendorGroups; }
OpenVendorGroup::~OpenVendorGroup() { --tOpenVendorGroups; }
bool OpenVendorGroup::here() { return tOpenVendorGroups > 0; }

VendorCalls::VendorCalls(Comm& c) : WrappingBackend(c.groupBackend(), c.groupBackend().context()), c_(c) {}

bool VendorCalls::defer() const { return c_.stagingState()->stagedPending() || OpenVendorGroup::here(); }

void VendorCalls::route(BackendCall call, Stream s) {
  if (depth_ > 0 && !deferred_) return call.run(inner_, s);
  if (depth_ == 0 && !defer()) return call.run(inner_, s);
  auto at = std::find(streams_.begin(), streams_.end(), s);
  if (at == streams_.end()) at = streams_.insert(streams_.end(), s);
  held_.emplace_back(static_cast<size_t>(at - streams_.begin()), std::move(call.run));
  if (depth_ == 0) handOver();
}

void VendorCalls::groupStart() {
  if (depth_++ > 0) return;
  deferred_ = defer();
  if (!deferred_) inner_.groupStart();
}

void VendorCalls::groupEnd() {
  if (depth_ == 0) throwError(hetcclInternalError, "vendor calls: groupEnd without groupStart");
  if (--depth_ > 0) return;
  if (!deferred_) return inner_.groupEnd();
  deferred_ = false;
  if (!held_.empty()) handOver();
}

void VendorCalls::handOver() {
  StagingState& ds = *c_.stagingState();
  DeviceRuntime& d = c_.device();
  std::vector<std::pair<size_t, Op>> calls = std::exchange(held_, {});
  const std::vector<Stream> streams = std::exchange(streams_, {});
  const uint64_t ticket = ds.completion().nextTicket();
  // Counted among the staged calls until the proxy has handed these to the
  // library (not until they ran): later vendor calls of this thread then
  // come after them, and go straight to the library once they are issued.
  ds.stagedQueued();
  auto issued = std::make_shared<std::atomic<bool>>(false);
  auto ready = std::make_shared<std::vector<Event>>();
  auto release = [&ds, ticket, ready, issued] {
    ds.completion().complete(ticket);
    for (Event e : *ready) ds.events().give(e);
    if (!*issued) ds.stagedRan();
  };
  try {
    for (Stream s : streams) {
      ready->push_back(ds.events().take());
      d.recordEvent(ready->back(), s);
    }
    for (Stream s : streams) d.streamWaitValue(s, ds.completion().flag(), ticket);
  } catch (...) {
    c_.proxy().submit([] {}, release);  // streams may already wait for the ticket
    throw;
  }
  LOG_TRACE(kColl,
            "%zu vendor library call(s) through the proxy (after staged calls, or in a group held open): "
            "ticket %llu",
            calls.size(), static_cast<unsigned long long>(ticket));
  Comm& c = c_;
  c_.proxy().submit(
      [&c, calls = std::move(calls), ready, issued] {
        DeviceRuntime& dev = c.device();
        StagingState& st = *c.stagingState();
        dev.makeCurrent();
        const Stream x = st.stream();
        for (Event e : *ready) dev.streamWaitEvent(x, e);
        Backend& be = c.groupBackend();
        be.groupStart();
        for (const auto& call : calls) call.second(be, x);
        be.groupEnd();
        *issued = true;
        st.stagedRan();
        st.sync(c.options().timeoutS, &c.abortFlag(), "waiting for vendor library calls made through the proxy");
      },
      release);
}

}  // namespace hetccl
