#include "transport/tcp/secure_link.h"

#include <algorithm>
#include <cstring>

namespace hetccl {

SecureLink::SecureLink(const secure::LinkKeys& keys, bool client, uint64_t rekeyRecords, const std::string& what)
    : sealer_(client ? keys.client : keys.server, rekeyRecords),
      opener_(client ? keys.server : keys.client, what, rekeyRecords) {
  out_.reserve(secure::kMaxRecordPlain + secure::kRecordOverhead);
}

void SecureLink::seal(std::span<const secure::Aes256Gcm::Piece> pieces) {
  size_t len = 0;
  for (const auto& p : pieces) len += p.len;
  out_.resize(len + secure::kRecordOverhead);
  outOff_ = 0;
  sealer_.seal(pieces, out_.data());
}

size_t SecureLink::flush(const Socket& s, const std::string& what) {
  size_t moved = 0;
  while (pending()) {
    size_t r = s.sendSome(out_.data() + outOff_, out_.size() - outOff_, what);
    if (r == 0) break;
    outOff_ += r;
    moved += r;
  }
  return moved;
}

size_t SecureLink::recvSome(const Socket& s, uint8_t* dst, size_t n, const std::string& what) {
  for (;;) {
    if (size_t whole = opener_.openInto(dst, n)) return whole;  // no copy: the record fits
    std::span<const uint8_t> p = opener_.plain();
    if (!p.empty()) {
      size_t k = std::min(n, p.size());
      memcpy(dst, p.data(), k);
      opener_.consume(k);
      return k;
    }
    std::span<uint8_t> room = opener_.space();
    size_t r = s.recvSome(room.data(), room.size(), what);
    if (r == 0) return 0;
    opener_.filled(r);
  }
}

}  // namespace hetccl
