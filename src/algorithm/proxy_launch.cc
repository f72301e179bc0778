#include "algorithm/proxy_launch.h"

#include <memory>
#include <string>
#include <utility>

#include "algorithm/vendor_calls.h"
#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

// What the calling thread and the proxy share of one launch.
struct Launch {
  std::vector<Event> started;  // one per stream of the call, recorded where it stood
  bool stored = false;         // the launch stream was given the ticket's store
  bool enqueued = false;       // the work is enqueued (it left the staged count)
};

// A launch whose work failed part way: the communicator fails (the peers
// told) and every wait of this rank's streams ends, so that what was
// enqueued of it, and the calls after it, run out instead of waiting for
// peers that will not come.
void failLaunch(Comm& c, hetcclResult_t code, const std::string& text) {
  c.fail(code, text);
  if (DeviceBorder* b = c.deviceBorder()) b->releaseAll();
  c.stagingState()->releaseAll();
}

}  // namespace

void launchThroughProxy(Comm& c, const std::vector<Stream>& streams, std::function<void(Stream)> work,
                        const char* what) {
  StagingState& ds = *c.stagingState();
  LaunchStream& ls = ds.launch();
  DeviceRuntime& d = c.device();
  const uint64_t ticket = ls.nextTicket();
  auto launch = std::make_shared<Launch>();
  ds.stagedQueued();
  // On the proxy after the job, whether it ran, failed or was dropped.
  auto finish = [&ds, &ls, launch, ticket] {
    if (!launch->stored) {
      try {
        ls.store(ticket);  // in order with the tickets before it
      } catch (const std::exception& e) {
        LOG_WARN(kColl, "launch %llu: the launch stream cannot store its ticket (%s): released from the CPU",
                 static_cast<unsigned long long>(ticket), e.what());
        ls.releaseAll();
      }
    }
    for (Event e : launch->started) ds.giveEvent(e);
    if (!launch->enqueued) ds.stagedRan();
  };
  try {
    for (Stream s : streams) {
      launch->started.push_back(ds.takeEvent());
      d.recordEvent(launch->started.back(), s);
    }
    for (Stream s : streams) d.streamWaitValue(s, ls.flag(), ticket);
  } catch (...) {
    c.proxy().submit([] {}, finish);  // streams may already wait for the ticket
    throw;
  }
  LOG_TRACE(kColl, "%s through the proxy: launch %llu", what, static_cast<unsigned long long>(ticket));
  c.proxy().submit(
      [&c, launch, ticket, work = std::move(work)] {
        DeviceRuntime& dev = c.device();
        StagingState& st = *c.stagingState();
        LaunchStream& l = st.launch();
        dev.makeCurrent();
        for (Event e : launch->started) dev.streamWaitEvent(l.stream(), e);
        try {
          work(l.stream());
        } catch (const Error& e) {
          failLaunch(c, e.code(), e.what());
          throw;
        } catch (const std::exception& e) {
          failLaunch(c, hetcclInternalError, e.what());
          throw;
        }
        l.store(ticket);
        launch->stored = true;
        launch->enqueued = true;
        st.stagedRan();
      },
      finish);
}

bool mayEnqueueHere(Comm& c) {
  if (c.proxy().onThisThread()) return true;
  return !c.stagingState()->stagedPending() && !OpenVendorGroup::here();
}

}  // namespace hetccl
