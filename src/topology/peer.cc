#include "topology/peer.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

#include "bootstrap/auth.h"
#include "core/error.h"

namespace hetccl {

std::vector<uint8_t> PeerInfo::serialize() const {
  std::vector<uint8_t> out(sizeof(PeerInfo));
  memcpy(out.data(), this, sizeof(PeerInfo));
  return out;
}

PeerInfo PeerInfo::deserialize(const std::vector<uint8_t>& bytes, int expectRank) {
  if (bytes.size() != sizeof(PeerInfo))
    throwError(hetcclRemoteError, "rank " + std::to_string(expectRank) + " published a record of " +
                                      std::to_string(bytes.size()) + " bytes (another hetccl version?)");
  PeerInfo p;
  memcpy(&p, bytes.data(), sizeof(PeerInfo));
  if (p.rank != expectRank || !memchr(p.hostname, 0, sizeof(p.hostname)) ||
      !memchr(p.deviceKind, 0, sizeof(p.deviceKind)) || !memchr(p.group, 0, sizeof(p.group)) ||
      !memchr(p.site, 0, sizeof(p.site)))
    throwError(hetcclRemoteError, "rank " + std::to_string(expectRank) + " published a malformed record");
  return p;
}

std::string localHostName() {
  char buf[64] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

uint64_t localHostHash() {
  std::string id = localHostName();
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot >> bootId) id += "/" + bootId;
  const uint8_t key[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 'h', 'o', 's', 't', 0, 0, 0, 0, 0};
  return sipHash24(key, id.data(), id.size());
}

}  // namespace hetccl
