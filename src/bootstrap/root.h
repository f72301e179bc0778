// The rendezvous root: a thread that collects one record from each of nranks
// authenticated ranks and hands every rank the whole table, then exits. It is
// started by hetcclGetUniqueId (NCCL-style) or by rank 0 in
// hetcclCommInitFromEnv, and gives up after its timeout.
#pragma once

#include <cstdint>
#include <vector>

#include "bootstrap/unique_id.h"

namespace hetccl {

// Binds `listenAt` (port 0: any), starts the root thread, and returns the id
// contents with the bound address (an unspecified bind address is replaced
// by SockAddr::local()).
IdContents startRootServer(const SockAddr& listenAt, const IdContents& job, double timeoutS);
// The same on a listener that is open already; `job` is used as it is.
void startRootServerOn(Socket listener, const IdContents& job, double timeoutS);

// Client side: sends this rank's record, returns all ranks' records in rank
// order. Every record has the same size (checked by the root).
std::vector<std::vector<uint8_t>> rendezvous(const IdContents& id, int rank, int nranks,
                                             const std::vector<uint8_t>& record, const Deadline& dl);

constexpr uint32_t kMaxRecordBytes = 64 * 1024;
constexpr int kMaxRanks = 1 << 20;

}  // namespace hetccl
