// Send/recv of GPU ranks of different groups through channels of parts in
// pinned memory: on one host shared memory (border/pair_links.h: a border
// peer's pair channel, or a pair link between ranks of other indices),
// across hosts each end's half of a channel that the pair relay carries
// (border/pair_relay.h, which the enqueue tells of every part): the sender's copy engine puts each part
// of the buffer into the channel (out stream) and the receiver's copies it
// straight into the receive buffer (in stream), chunk flags as stream
// memory operations, in the caller's stream order; the calling thread
// never waits and the proxy only watches. The two directions of a pair are
// counted apart, so a send and a receive may be issued in either order or
// in one group, and no other peer takes part. Peers in the same group go
// to the vendor library (enqueue.cc); calls smaller than
// HETCCL_GPU_BORDER_MIN stage through pinned memory.
#pragma once

#include <vector>

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Whether the send or receive `a` goes through the device border. Both
// ends of it decide alike (from the peer and the size alone). Makes the
// channel where it is the pair's first use across hosts.
bool takesBorderPair(Comm& c, const CollArgs& a);
// Makes the channels of those of `calls` that take the device border and
// have none yet: pinned memory registered with the GPU runtime, which may
// synchronise the device, so the enqueue calls this before anything of
// the group call is enqueued.
void prepareBorderPairs(Comm& c, const std::vector<CollArgs>& calls);
// Enqueues those of `calls` (one group: they run together) that
// takesBorderPair, on their streams; returns the others, in order.
std::vector<CollArgs> enqueueBorderPairs(Comm& c, std::vector<CollArgs> calls);

}  // namespace hetccl
