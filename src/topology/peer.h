// What every rank publishes about itself at init (a fixed-size record).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetccl {

struct PeerInfo {
  int32_t rank = -1;
  int32_t pid = 0;
  uint64_t hostHash = 0;  // same value <=> same host (hostname + boot id)
  char hostname[64] = {0};
  char deviceKind[16] = {0};  // "host", "cuda", "hip"
  char group[32] = {0};       // resolved group name
  int32_t deviceIndex = -1;
  uint32_t reserved = 0;
  char site[32] = {0};        // HETCCL_SITE ("" : the one unnamed site)
  uint64_t groupMapHash = 0;  // of HETCCL_GROUP_MAP as this rank read it (0: unset): every rank must agree

  std::vector<uint8_t> serialize() const;
  // Throws RemoteError on a record of the wrong size or without terminators.
  static PeerInfo deserialize(const std::vector<uint8_t>& bytes, int expectRank);
};

// This process's host identity.
uint64_t localHostHash();
std::string localHostName();

}  // namespace hetccl
