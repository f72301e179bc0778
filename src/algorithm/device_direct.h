// The direct path of a GPU rank's AllReduce across groups
// (HETCCL_GPU_DIRECT): where the transport moves this rank's device memory
// itself (UCX built with CUDA or ROCm), nothing is copied to pinned memory.
// The caller's stream records an event and waits for the call's ticket; the
// proxy runs the AllReduce plan on the user's device buffers: group steps in
// the vendor library on the proxy's stream, border transfers with device
// pointers (Xfer::device), folds by the device kernels plugin into device
// scratch, then stores the ticket. Failure and abort store it too.
#pragma once

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Whether this call goes the direct way: the communicator chose it at init
// (Comm::gpuDirect), a single AllReduce, in place or with disjoint buffers,
// and no integer PreMulSum (the kernels scale floating types only).
bool takesDirectPath(const Comm& c, const CollArgs& a);
void enqueueDirectAllReduce(Comm& c, const CollArgs& a);

}  // namespace hetccl
