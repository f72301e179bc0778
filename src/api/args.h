// Checks of a collective call's arguments, before anything runs: data type,
// count, op, root or peer, stream, and the memory each buffer is. Throw
// InvalidArgument naming what is wrong.
#pragma once

#include "algorithm/coll.h"
#include "comm/comm.h"

namespace hetccl {

// Under a CommRef. Resolves a.op from `op` where the call reduces.
void checkArgs(hetcclComm* comm, CollArgs& a, hetcclRedOp_t op, bool reduces);

// Every buffer the call touches must be memory this rank may use: its own
// device's on GPU ranks, host memory on host ranks.
void checkBufferKinds(Comm& c, const CollArgs& a);

}  // namespace hetccl
