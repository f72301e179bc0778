// The shm transport's memory: how large its rings may be, and the names of
// its segments in /dev/shm and their cleanup; making and mapping segments
// (also for the device border's, border/device_border.h).
//
// One communicator's rings on one host: n ranks there, each with an inbox
// holding one ring per peer, so n x (n - 1) rings. Each ring is
// `slots` x (64-byte header + slot bytes) plus a small header. The total is
// bounded by HETCCL_SHM_MAX: rings are HETCCL_BUFFSIZE where that fits;
// where HETCCL_BUFFSIZE is unset and it does not, they get fewer slots (down
// to 2) and then smaller slots (down to 4 KiB); what cannot fit (or an
// explicit HETCCL_BUFFSIZE that does not) is refused with a message giving
// the formula and the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hetccl {

struct ShmGeometry {
  size_t slotBytes = 0;
  uint32_t slots = 0;
  size_t ringBytes = 0;  // one ring, header included
  size_t segBytes = 0;   // one rank's inbox: header + (n - 1) rings
  size_t hostBytes = 0;  // all n inboxes
};

constexpr size_t kShmInboxHeader = 256;
constexpr size_t kShmRingHeader = 128;
constexpr size_t kShmSlotHeader = 64;

// From the settings (HETCCL_BUFFSIZE, HETCCL_SHM_SLOT_BYTES, HETCCL_SHM_MAX)
// for `n` ranks on the host. Throws hetcclInvalidArgument as above.
ShmGeometry shmGeometry(int n, size_t buffBytes);

// "/hetccl-<pid>-<job>-<rank>": the creator's pid lets a later job on this
// host remove what a killed one left behind.
std::string shmSegmentName(int creatorPid, uint64_t jobId, int rank);

// Unlinks this user's hetccl segments whose creating process is gone (a job
// killed before it unlinked its segments: they live until reboot
// otherwise). Returns how many it removed.
int removeStaleShmSegments();

// Creates `name` with `bytes` of memory reserved now (fallocate), so that a
// full /dev/shm is a clear error here instead of a SIGBUS later. Returns
// the descriptor; throws hetcclSystemError naming the size and /dev/shm.
int createShmSegment(const std::string& name, size_t bytes);

// `bytes` rounded up to whole pages.
size_t pageRound(size_t bytes);

// Maps `bytes` of the segment open at fd (shared, read-write, populated
// now) and closes fd; fd -1: anonymous memory of this process, mapped
// alike (shared: a fork does not copy pages registered with a GPU
// runtime). Throws hetcclSystemError naming `what`.
uint8_t* mapShmSegment(int fd, size_t bytes, const std::string& what);

}  // namespace hetccl
