// Helper threads for large memory work that one thread cannot saturate:
// reading a peer's memory (process_vm_readv) and folding it in, sealing and
// opening encrypted records. One pool per
// process, started on first use; a job is cut into parts that the caller and
// the helpers claim one at a time. Parts must not block on other ranks (they
// copy and fold memory that is already there), so a job always finishes.
#pragma once

#include <functional>

namespace hetccl {

// Threads a rank uses for such work when `localRanks` ranks share this host:
// HETCCL_HOST_THREADS when set above 0, else the host's usable cores divided
// by localRanks, between 1 and 8.
int hostThreadsFor(int localRanks);

// Runs fn(part) for every part in [0, nparts) and returns when all are done,
// rethrowing the first exception a part threw (the other parts still run).
// The caller takes parts too; with nparts <= 1, or while another thread of
// this process runs a job, the caller runs every part itself.
void runParts(int nparts, const std::function<void(int part)>& fn);

}  // namespace hetccl
