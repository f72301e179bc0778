// AllReduce of GPU ranks across groups through the device border
// (border/device_border.h), all in the caller's stream order; the calling
// thread never waits:
//   1. inside the group (k ranks), the vendor library reduce-scatters the
//      user's buffer in device memory: rank i holds the group's sum of
//      share i (count/k elements; the last share takes the remainder);
//   2. the border peers (index i of every group) all-reduce that share:
//      each copies the parts the others own to its shared segment (copy
//      engine), copies in the parts it owns from every peer, folds them with
//      the device kernels in one fixed order, copies its reduced part out,
//      and copies in every peer's reduced part; slice by slice, copies out on
//      one internal stream and copies in plus folds on another, so the two
//      directions and successive slices overlap. Calls of HETCCL_SMALL_BYTES
//      (capped at one part) take a one-round latency path on the caller's
//      stream: every peer copies its whole share out and folds all of them,
//      for shares of up to 16 KiB in one kernel (DeviceBorder::roundKernel);
//   3. inside the group, the vendor library all-gathers the shares.
// The proxy thread watches the call (bounded by HETCCL_TIMEOUT_S and the
// abort flag): on a timeout it releases every stream wait and fails the
// communicator naming the border peer that did not come.
#pragma once

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Enqueues `a` (an AllReduce that takesDeviceBorder, device_border_coll.h)
// on its stream.
void enqueueDeviceBorderAllReduce(Comm& c, const CollArgs& a);

}  // namespace hetccl
