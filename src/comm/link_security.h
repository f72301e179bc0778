// Which links of a communicator carry encrypted records (HETCCL_ENCRYPT,
// HETCCL_SITE): decided by every rank alike from the peers' records, so the
// two ends of a link always agree. tcp and ucx links encrypt; a link that
// should and goes over same-host shm stays in this host's memory
// (docs/security.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/peer.h"

namespace hetccl {

struct LinkSecurity {
  std::string mode;              // "off", "cross-site", "all"
  std::vector<uint8_t> encrypt;  // by global rank: this rank's link to it is encrypted
  int encryptedPeers = 0;
  uint64_t rekeyRecords = 0;
};

// The links to encrypt. `intra`/`inter` are the transports of same-host and
// other-host links. Throws InvalidUsage for a weak secret (derived from
// launcher variables) where any link is encrypted, and when libcrypto
// cannot be loaded.
LinkSecurity planLinkSecurity(const std::vector<PeerInfo>& peers, int rank, const std::string& intra,
                              const std::string& inter, bool weakSecret);

}  // namespace hetccl
