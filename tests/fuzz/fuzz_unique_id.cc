// decodeUniqueId on arbitrary 128-byte ids (shorter inputs are zero-padded).
// Oracle: an id is refused only with hetcclInvalidArgument; an accepted id
// decodes to exactly the fields its bytes hold (layout of unique_id.h), and
// encode/decode round-trips it.
#include <arpa/inet.h>

#include <cstring>

#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "fuzz_util.h"

using namespace hetccl;

namespace {

// Offsets of the wire layout (unique_id.h / unique_id.cc).
constexpr size_t kMagicAt = 0, kVersionAt = 4, kFamilyAt = 6, kPortAt = 8, kAddrAt = 12, kGrowAt = 28, kJobAt = 32,
                 kSecretAt = 40;

template <class T>
T field(const hetcclUniqueId& id, size_t at) {
  T v;
  memcpy(&v, id.internal + at, sizeof(T));
  return v;
}

bool sameContents(const IdContents& a, const IdContents& b) {
  if (a.root.ss.ss_family != b.root.ss.ss_family || a.root.len != b.root.len || a.root.port() != b.root.port())
    return false;
  if (a.root.ss.ss_family == AF_INET) {
    if (memcmp(&reinterpret_cast<const sockaddr_in*>(&a.root.ss)->sin_addr,
               &reinterpret_cast<const sockaddr_in*>(&b.root.ss)->sin_addr, 4) != 0)
      return false;
  } else if (memcmp(&reinterpret_cast<const sockaddr_in6*>(&a.root.ss)->sin6_addr,
                    &reinterpret_cast<const sockaddr_in6*>(&b.root.ss)->sin6_addr, 16) != 0) {
    return false;
  }
  return a.jobId == b.jobId && a.secret == b.secret && a.growFrom == b.growFrom;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hetcclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (size > 0) memcpy(id.internal, data, std::min(size, sizeof(id.internal)));

  IdContents c;
  try {
    c = decodeUniqueId(id);
  } catch (const Error& e) {
    FUZZ_CHECK_MSG(e.code() == hetcclInvalidArgument, e.what());
    FUZZ_CHECK(strstr(e.what(), "unique id") != nullptr);
    // Refused: the magic, version or family must really be wrong, or a grow
    // id's size past any communicator's.
    uint16_t fam = field<uint16_t>(id, kFamilyAt);
    FUZZ_CHECK(field<uint32_t>(id, kMagicAt) != kProtocolMagic || field<uint16_t>(id, kVersionAt) != kProtocolVersion ||
               (fam != AF_INET && fam != AF_INET6) || field<uint32_t>(id, kGrowAt) > static_cast<uint32_t>(kMaxRanks));
    fuzz::note("refused");
    return 0;
  }

  FUZZ_CHECK(field<uint32_t>(id, kMagicAt) == kProtocolMagic);
  FUZZ_CHECK(field<uint16_t>(id, kVersionAt) == kProtocolVersion);
  const uint16_t fam = field<uint16_t>(id, kFamilyAt);
  FUZZ_CHECK(c.root.ss.ss_family == fam);
  FUZZ_CHECK(c.root.port() == field<uint16_t>(id, kPortAt));
  if (fam == AF_INET) {
    FUZZ_CHECK(c.root.len == sizeof(sockaddr_in));
    FUZZ_CHECK(memcmp(&reinterpret_cast<const sockaddr_in*>(&c.root.ss)->sin_addr, id.internal + kAddrAt, 4) == 0);
  } else {
    FUZZ_CHECK(fam == AF_INET6);
    FUZZ_CHECK(c.root.len == sizeof(sockaddr_in6));
    FUZZ_CHECK(memcmp(&reinterpret_cast<const sockaddr_in6*>(&c.root.ss)->sin6_addr, id.internal + kAddrAt, 16) == 0);
  }
  FUZZ_CHECK(c.jobId == field<uint64_t>(id, kJobAt));
  FUZZ_CHECK(static_cast<uint32_t>(c.growFrom) == field<uint32_t>(id, kGrowAt));
  FUZZ_CHECK(memcmp(c.secret.data(), id.internal + kSecretAt, 32) == 0);
  std::string where = c.root.str();
  FUZZ_CHECK(!where.empty() && where.find(std::to_string(c.root.port())) != std::string::npos);

  // Round trip: what the library encodes from it decodes to the same contents
  // and carries the same significant bytes.
  hetcclUniqueId again = encodeUniqueId(c);
  IdContents c2 = decodeUniqueId(again);
  FUZZ_CHECK(sameContents(c, c2));
  FUZZ_CHECK(memcmp(again.internal, id.internal, kPortAt + 2) == 0);  // magic, version, family, port
  FUZZ_CHECK(memcmp(again.internal + kAddrAt, id.internal + kAddrAt, fam == AF_INET ? 4 : 16) == 0);
  FUZZ_CHECK(memcmp(again.internal + kGrowAt, id.internal + kGrowAt, 4 + 8 + 32) == 0);  // grow size, job, secret
  fuzz::note(fam == AF_INET ? "accepted ipv4" : "accepted ipv6");
  return 0;
}
