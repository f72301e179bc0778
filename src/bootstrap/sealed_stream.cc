#include "bootstrap/sealed_stream.h"

#include <algorithm>
#include <cstring>

namespace hetccl {

SealedStream::SealedStream(const secure::LinkKeys& keys, bool client, const std::string& what)
    : sealer_(client ? keys.client : keys.server), opener_(client ? keys.server : keys.client, what) {}

size_t SealedStream::sealOne(const void* buf, size_t n) {
  const size_t len = std::min(n, secure::kMaxRecordPlain);
  secure::Aes256Gcm::Piece p{static_cast<const uint8_t*>(buf), len};
  out_.resize(len + secure::kRecordOverhead);
  outOff_ = 0;
  sealer_.seal({&p, 1}, out_.data());
  return len;
}

void SealedStream::sendAll(const Socket& s, const void* buf, size_t n, const Deadline& dl, const std::string& what) {
  if (outOff_ < out_.size()) s.rawSendAll(out_.data() + outOff_, out_.size() - outOff_, dl, what);
  out_.clear();
  outOff_ = sealedLen_ = 0;
  auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    size_t k = sealOne(p, n);
    s.rawSendAll(out_.data(), out_.size(), dl, what);
    p += k;
    n -= k;
  }
  out_.clear();
  outOff_ = 0;
}

size_t SealedStream::take(uint8_t* dst, size_t n) {
  if (size_t whole = opener_.openInto(dst, n)) return whole;
  std::span<const uint8_t> plain = opener_.plain();
  size_t k = std::min(n, plain.size());
  if (k) memcpy(dst, plain.data(), k);
  opener_.consume(k);
  return k;
}

void SealedStream::recvAll(const Socket& s, void* buf, size_t n, const Deadline& dl, const std::string& what) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    size_t k = take(p, n);
    p += k;
    n -= k;
    if (k > 0) continue;
    std::span<uint8_t> room = opener_.space();
    s.rawRecvAll(room.data(), room.size(), dl, what);
    opener_.filled(room.size());
  }
}

size_t SealedStream::sendSome(const Socket& s, const void* buf, size_t n, const std::string& what) {
  if (n == 0) return 0;
  if (sealedLen_ == 0) sealedLen_ = sealOne(buf, n);
  while (outOff_ < out_.size()) {
    size_t r = s.rawSendSome(out_.data() + outOff_, out_.size() - outOff_, what);
    if (r == 0) return 0;
    outOff_ += r;
  }
  size_t done = sealedLen_;
  sealedLen_ = 0;
  out_.clear();
  outOff_ = 0;
  return done;
}

size_t SealedStream::recvSome(const Socket& s, void* buf, size_t n, const std::string& what) {
  auto* dst = static_cast<uint8_t*>(buf);
  for (;;) {
    if (size_t k = take(dst, n)) return k;
    std::span<uint8_t> room = opener_.space();
    size_t r = s.rawRecvSome(room.data(), room.size(), what);
    if (r == 0) return 0;
    opener_.filled(r);
  }
}

}  // namespace hetccl
