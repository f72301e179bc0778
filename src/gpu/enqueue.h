// Calls of GPU ranks (device kinds cuda, hip). They return at once and take
// effect in the order of the caller's stream:
// - one group: straight to the vendor library on the caller's stream, the op
//   passed whole (no copies, no synchronisation of hetccl's own);
// - several groups: most calls take the device border (device_border_coll.h);
//   the rest stage: the caller's stream copies the buffers to pinned host
//   memory, records an event and waits on the communicator's completion
//   flag; the proxy thread waits for the event, runs the plan on the host
//   copies (group steps through the vendor library, border steps over the
//   transport) and stores the flag, which releases the caller's stream to
//   copy the results back. The flag is stored on failure and abort too, so
//   a stream never waits forever; the error is recorded first and reported
//   by hetcclCommGetAsyncError and the next call.
#pragma once

#include <span>
#include <vector>

#include "algorithm/coll.h"
#include "backend/backend.h"

namespace hetccl {

class Comm;
class LocalOps;
struct ChunkHooks;

// The calls of one hetccl call or one group (collectives in order, then all
// point-to-point operations together), on a GPU rank's communicator. The
// calling thread never waits for the device or the proxy: vendor library
// calls it would make while staged calls are queued on the proxy go through
// the proxy (vendor_calls.h). `record`: the calls' first flight record
// (0: none); returns whether the calls end their records themselves (eager
// calls handed off at stream time, once the communicator captured a call),
// else the caller arranges it.
bool enqueueDeviceCalls(Comm& c, std::span<const CollArgs> calls, uint64_t record = 0);

// Whether a call's buffers are in place (send + sendAt == recv + recvAt:
// AllGather's send block at recvAt in recv, ReduceScatter's recv block at
// sendAt in send) or apart (send's sendBytes wholly outside recv's
// recvBytes).
bool inPlaceOrDisjoint(const CollArgs& a, size_t sendBytes, size_t recvBytes, size_t recvAt = 0, size_t sendAt = 0);

}  // namespace hetccl
