// The rendezvous root: a thread that collects one record from each of nranks
// authenticated ranks and hands every rank the whole table, then exits. It is
// started by hetcclGetUniqueId (NCCL-style) or by rank 0 in
// hetcclCommInitFromEnv, and gives up after its timeout.
#pragma once

#include <cstdint>
#include <string>
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

// A rank that fails before it can join (bad settings, a bad group map)
// reports it instead of a record: the root then refuses every rank with its
// message, so all fail at once instead of waiting out the timeout. Best
// effort: errors are swallowed (the caller is failing anyway).
void reportInitFailure(const IdContents& id, int rank, int nranks, const std::string& why, double timeoutS);

constexpr uint32_t kMaxRecordBytes = 64 * 1024;
// The record-size word of a failure report has this bit set; the rest is
// the message's length (at most kMaxFailureBytes).
constexpr uint32_t kFailedRecord = 0x80000000u;
constexpr uint32_t kMaxFailureBytes = 400;
constexpr int kMaxRanks = 1 << 20;

}  // namespace hetccl
