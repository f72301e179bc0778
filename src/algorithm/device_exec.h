// Calls of GPU ranks (device kinds cuda, hip). They return at once and take
// effect in the order of the caller's stream:
// - one group: straight to the vendor library on the caller's stream, the op
//   passed whole (no copies, no synchronisation of hetccl's own);
// - several groups: the caller's stream records an event and then waits on
//   the communicator's completion flag; the proxy thread waits for the event,
//   copies the buffers to pinned host memory on its own stream, runs the
//   plan there (group steps through the vendor library, border steps over
//   the transport), copies the results back and stores the flag, which
//   releases the caller's stream. The flag is stored on failure and abort
//   too, so a stream never waits forever; the error is then reported by
//   hetcclCommGetAsyncError and the next call.
#pragma once

#include <vector>

#include "algorithm/coll.h"
#include "backend/backend.h"

namespace hetccl {

class Comm;
class LocalOps;
struct ChunkHooks;

// The calls of one hetccl call or one group (collectives in order, then all
// point-to-point operations together), on a GPU rank's communicator.
// mayWait: the calling thread may wait for the call (a blocking
// communicator, not inside a group over several communicators), which the
// direct path (device_direct.h) needs; else it stages.
void enqueueDeviceCalls(Comm& c, std::vector<CollArgs> calls, bool mayWait = false);

// Whether a call's buffers are in place (send + sendAt == recv + recvAt:
// AllGather's send block at recvAt in recv, ReduceScatter's recv block at
// sendAt in send) or apart (send's sendBytes wholly outside recv's
// recvBytes).
bool inPlaceOrDisjoint(const CollArgs& a, size_t sendBytes, size_t recvBytes, size_t recvAt = 0, size_t sendAt = 0);

}  // namespace hetccl
