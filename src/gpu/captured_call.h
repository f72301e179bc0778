// Calls across groups handed to the proxy when the stream reaches them, so
// that a graph that captured them runs them again at every replay
// (docs/design-gpu.md, Captured calls). Each call has a pinned block of its
// own, holding the host copies of its buffers and its flag, and its stream
// runs: [copies in, device to the block] [host function: the flag to 0, the
// call handed to the proxy, which takes its place in the communicator's
// order then] [wait until the flag is at least 1] [copies out]. The proxy
// stores 1 once the call is done, on failure and abort too. Captured, the
// block goes with the last graph or exec holding it (a user object); not
// captured (an eager call while captured calls live, so that every call
// reaches the proxy in stream order), after its copies out.
#pragma once

#include <span>
#include <vector>

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Whether any of `calls` names a stream being captured.
bool anyCaptured(Comm& c, std::span<const CollArgs> calls);
// Enqueues `calls` (collectives and send/recv of one hetccl call or group)
// as above; `captured`: their stream is being captured. Throws
// hetcclInvalidUsage, before anything is enqueued, where they cannot be
// captured (several streams, or a runtime without user objects or stream
// memory operations). `record` (eager calls): their first flight record,
// finished when the proxy has run them.
void enqueueHandedOffCalls(Comm& c, const std::vector<CollArgs>& calls, bool captured, uint64_t record = 0);

}  // namespace hetccl
