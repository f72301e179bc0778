// What every rank publishes about itself at init (a fixed-size record).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetccl {

inline constexpr uint64_t kGroupMapNotRead = 0;  // the group was given by name
inline constexpr uint64_t kGroupMapUnset = 2;    // no map: the group is the device kind

struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;  // same value <=> same host (hostname + boot id)
  char hostname[64] = {0};
  char deviceKind[16] = {0};  // "host", "cuda", "hip"
  char group[32] = {0};       // resolved group name
  int32_t deviceIndex = -1;
  uint32_t reserved = 0;
  char site[32] = {0};  // HETCCL_SITE ("" : the one unnamed site)
  // Of HETCCL_GROUP_MAP where this rank's group came from it (odd), else
  // kGroupMapUnset or kGroupMapNotRead: every rank that read a map or had
  // none to read must agree.
  uint64_t groupMapHash = 0;

  std::vector<uint8_t> serialize() const;
  // Throws RemoteError on a record of the wrong size or without terminators.
  static PeerInfo deserialize(const std::vector<uint8_t>& bytes, int expectRank);
};

// This process's host identity.
uint64_t localHostHash();
std::string localHostName();

}  // namespace hetccl
