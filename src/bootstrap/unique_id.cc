#include "bootstrap/unique_id.h"

#include <cstring>

#include "bootstrap/root.h"
#include "core/error.h"

namespace hetccl {
namespace {
struct Wire {
  uint32_t magic;
  uint16_t version;
  uint16_t family;
  uint16_t port;
  uint16_t reserved0;
  uint8_t addr[16];
  uint32_t growFrom;  // a grow id: the running communicator's size; else 0
  uint64_t jobId;
  uint8_t secret[32];
  uint8_t reserved2[56];
};
static_assert(sizeof(Wire) == HETCCL_UNIQUE_ID_BYTES, "unique id layout");
}  // namespace

hetcclUniqueId encodeUniqueId(const IdContents& c) {
  Wire w{};
  w.magic = kProtocolMagic;
  w.version = kProtocolVersion;
  w.family = c.root.ss.ss_family;
  w.port = c.root.port();
  if (w.family == AF_INET)
    memcpy(w.addr, &reinterpret_cast<const sockaddr_in*>(&c.root.ss)->sin_addr, 4);
  else
    memcpy(w.addr, &reinterpret_cast<const sockaddr_in6*>(&c.root.ss)->sin6_addr, 16);
  w.growFrom = static_cast<uint32_t>(c.growFrom);
  w.jobId = c.jobId;
  memcpy(w.secret, c.secret.data(), 32);
  hetcclUniqueId id;
  memcpy(id.internal, &w, sizeof(w));
  return id;
}

IdContents decodeUniqueId(const hetcclUniqueId& id) {
  Wire w;
  memcpy(&w, id.internal, sizeof(w));
  if (w.magic != kProtocolMagic)
    throwError(hetcclInvalidArgument,
               "unique id: not made by hetcclGetUniqueId (bad magic; an id from NCCL/RCCL or uninitialised bytes?)");
  if (w.version != kProtocolVersion)
    throwError(hetcclInvalidArgument, "unique id: made by protocol version " + std::to_string(w.version) +
                                          ", this library speaks " + std::to_string(kProtocolVersion));
  IdContents c;
  if (w.family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&c.root.ss);
    a->sin_family = AF_INET;
    memcpy(&a->sin_addr, w.addr, 4);
    c.root.len = sizeof(sockaddr_in);
  } else if (w.family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&c.root.ss);
    a->sin6_family = AF_INET6;
    memcpy(&a->sin6_addr, w.addr, 16);
    c.root.len = sizeof(sockaddr_in6);
  } else {
    throwError(hetcclInvalidArgument, "unique id: unknown address family " + std::to_string(w.family));
  }
  c.root.setPort(w.port);
  if (w.growFrom > static_cast<uint32_t>(kMaxRanks))
    throwError(hetcclInvalidArgument,
               "unique id: grow id of a communicator of " + std::to_string(w.growFrom) + " ranks (corrupt bytes?)");
  c.growFrom = static_cast<int>(w.growFrom);
  c.jobId = w.jobId;
  memcpy(c.secret.data(), w.secret, 32);
  return c;
}

IdContents newIdContents(const SockAddr& root) {
  IdContents c;
  c.root = root;
  randomBytes(&c.jobId, sizeof(c.jobId));
  randomBytes(c.secret.data(), c.secret.size());
  return c;
}

}  // namespace hetccl
