// The direct path of a GPU rank's AllReduce, Broadcast and AllGather across
// groups (HETCCL_GPU_DIRECT): where the transport moves this rank's device memory
// itself (UCX built with CUDA or ROCm), nothing is copied to pinned memory.
// The proxy runs the collective's plan on the user's device buffers once the
// caller's stream has reached the call: group steps in the vendor library on
// the proxy's stream, border transfers with device pointers (Xfer::device),
// folds by the device kernels plugin into device scratch.
//
// The calling thread waits for it (like a host rank's call); the caller's
// stream gets no wait enqueued. A stream that waits on the device for the
// proxy while the transport issues device work of its own can deadlock:
// UCX allocates pinned buffers and maps CUDA IPC handles lazily, and those
// are implicit device synchronisations that wait for the waiting stream.
// So this path trades the staged path's asynchrony for zero-copy transfers
// (docs/design.md, GPU ranks).
#pragma once

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Whether this call goes the direct way: the communicator chose it at init
// (Comm::gpuDirect); an AllReduce (no integer PreMulSum: the kernels scale
// floating types only), Broadcast or AllGather of at least one element and
// Comm::gpuDirectMin bytes (AllGather: its output); in place or with
// disjoint buffers. Reduce, ReduceScatter and the rest stage.
bool takesDirectPath(const Comm& c, const CollArgs& a);
// Runs it on the proxy after the jobs queued before it and returns when it
// is done (its error, if any, is thrown and sticks on the proxy).
void runDirectCall(Comm& c, const CollArgs& a);

}  // namespace hetccl
