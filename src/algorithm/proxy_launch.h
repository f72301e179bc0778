// GPU calls whose device work the proxy enqueues after the calling thread
// has returned (device/launch_stream.h has the streams' side): the calling
// thread makes each of the call's streams record an event and wait for a
// ticket (two stream operations a stream, whatever the call's size), and
// hands the work to the proxy, which enqueues it on the launch stream (a
// stream of hetccl's own, at HETCCL_GPU_STREAM_PRIORITY) after those events
// and has that stream store the ticket after it. The proxy runs its jobs in
// submission order, so launches, staged calls and vendor calls handed over
// (vendor_calls.h) reach the device and the vendor library in the order the
// calling thread issued them; it never waits for the device in a launch
// (watches run on the communicator's watcher).
#pragma once

#include <functional>
#include <vector>

#include "device/device.h"

namespace hetccl {

class Comm;

// Hands `work` to the proxy as described above. `streams`: the call's
// streams (their work so far comes first; their later work comes after).
// `work(s)` runs on the proxy thread and enqueues on s (or on streams that
// fork from s and join it again). Counted among the staged calls until the
// proxy has enqueued it, so the vendor calls this thread makes meanwhile go
// through the proxy after it. A failure in `work` fails the communicator and
// releases its streams; the launch stream stores the ticket after whatever
// was enqueued, and after a launch the proxy dropped, so no stream waits for
// ever. `what` names the work in the log.
void launchThroughProxy(Comm& c, const std::vector<Stream>& streams, std::function<void(Stream)> work,
                        const char* what);

// Whether the calling thread may enqueue a call's device work itself now:
// nothing is queued on the proxy that the device or the vendor library
// must get first, and no vendor group is held open on this thread
// (OpenVendorGroup). On the proxy's own thread: always.
bool mayEnqueueHere(Comm& c);

}  // namespace hetccl
