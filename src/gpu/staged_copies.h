// The staged path's pieces that captured calls share with eager ones
// (enqueue.cc): host copies of a call's buffers in one pinned block, the
// copies in and out on the caller's streams, and the proxy's part.
#pragma once

#include <vector>

#include "algorithm/coll.h"
#include "device/device.h"

namespace hetccl {

class Comm;
struct ChunkHooks;

// Host copies of one call's buffers in pinned slot memory.
struct HostCopy {
  const CollArgs* user;
  CollArgs host;
  CallExtent ext;
  uint8_t* region = nullptr;  // pinned copy of [lo, lo + bytes)
  const uint8_t* lo = nullptr;
  size_t bytes = 0;
  uint8_t* sendCopy = nullptr;  // separate send copy when the ranges do not overlap
  size_t offset = 0;            // of region in the pinned block
  size_t scalarOffset = 0;      // of the PreMulSum scalar's copy (op.scalarAt), if any
};

// Lays out the host copies of `calls` one after the other in one pinned
// block; returns the block's size.
size_t layoutHostCopies(const Comm& c, const std::vector<CollArgs>& calls, std::vector<HostCopy>* out);
// Places the host copies in `base` (a pinned block of layoutHostCopies' size)
// and enqueues the copies in (device to host) on each call's own stream.
std::vector<HostCopy> stageIn(Comm& c, const std::vector<CollArgs>& calls, uint8_t* base);
// Enqueues the copies out (host to device) on each call's own stream.
void stageOut(Comm& c, const std::vector<HostCopy>& ms);
// The proxy's part of a staged call: once the `ready` events have fired
// (the caller's streams copied the buffers in), run the plans on the host
// copies; group steps of a group of several GPU ranks go through the vendor
// library (StagedBackend).
void runStaged(Comm& c, const std::vector<CollArgs>& host, const std::vector<Event>& ready,
               ChunkHooks* hooks = nullptr);

}  // namespace hetccl
