// What device_border.cc and device_border_setup.cc share of a segment's
// layout: its header, the flags' spacing and the names' salts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/shm/shm_segment.h"

namespace hetccl::border_layout {

constexpr size_t kFlagStride = 64;  // one cache line per flag: no false sharing between writers
constexpr uint64_t kMagic = 0x6865746363426472ull;
constexpr uint64_t kNameSalt = 0x626f72646572ull;  // keeps these names apart from the shm transport's
constexpr uint64_t kLinkSalt = 0x6c696e6bull;      // ... and the pair links' from the border segments
constexpr size_t kMinPart = size_t{64} << 10;
constexpr size_t kHeaderBytes = 512;

// The first bytes of every rank's segment. failedBy is this job's failure
// word on this host: 1 + the first rank whose communicator failed (each
// rank marks every rank's header); its reason is in that rank's header.
// left: 1 once the rank's communicator ended or its process exited
// normally (DeviceBorder::markLeft).
struct Header {
  uint64_t magic;
  uint64_t jobId;
  std::atomic<int32_t> failedBy;
  std::atomic<int32_t> left;
  char reason[kHeaderBytes - 24];
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header outgrew its room");

inline uint8_t* mapSegment(int fd, size_t bytes, const std::string& name) {
  return mapShmSegment(fd, bytes, "device border: " + name);
}

}  // namespace hetccl::border_layout
