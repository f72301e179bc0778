#include "bootstrap/sealed_stream.h"

#include <algorithm>

namespace hetccl {

// One record at a time, never read ahead: after the records the socket may
// carry bytes that are not (the stream ends where the bootstrap's does).
SealedStream::SealedStream(const secure::LinkKeys& keys, bool client, const std::string& what)
    : ch_(keys, client, secure::kDefaultRekeyRecords, what) {}

size_t SealedStream::sealOne(const void* buf, size_t n) {
  secure::PlainRecord r;
  r.piece[0] = {static_cast<const uint8_t*>(buf), std::min(n, secure::kMaxRecordPlain)};
  ch_.seal({&r, 1});
  return r.piece[0].len;
}

void SealedStream::sendAll(const Socket& s, const void* buf, size_t n, const Deadline& dl, const std::string& what) {
  auto blocking = [&](const uint8_t* p, size_t k) {
    s.rawSendAll(p, k, dl, what);
    return k;
  };
  ch_.flush(blocking);  // the rest of a record that sendSome began
  sealed_ = false;
  for (auto* p = static_cast<const uint8_t*>(buf); n > 0;) {
    size_t k = sealOne(p, n);
    ch_.flush(blocking);
    p += k;
    n -= k;
  }
}

void SealedStream::recvAll(const Socket& s, void* buf, size_t n, const Deadline& dl, const std::string& what) {
  for (auto* p = static_cast<uint8_t*>(buf); n > 0;) {
    size_t k = ch_.take(p, n);
    p += k;
    n -= k;
    if (k > 0) continue;
    std::span<uint8_t> room = ch_.space();
    s.rawRecvAll(room.data(), room.size(), dl, what);
    ch_.filled(room.size());
  }
}

size_t SealedStream::sendSome(const Socket& s, const void* buf, size_t n, const std::string& what) {
  if (n == 0) return 0;
  if (!sealed_) {
    sealOne(buf, n);
    sealed_ = true;
  }
  ch_.flush([&](const uint8_t* p, size_t k) { return s.rawSendSome(p, k, what); });
  if (ch_.pending()) return 0;
  sealed_ = false;
  return ch_.sealedPlain();
}

size_t SealedStream::recvSome(const Socket& s, void* buf, size_t n, const std::string& what) {
  return ch_.recvSome([&](uint8_t* p, size_t k) { return s.rawRecvSome(p, k, what); }, static_cast<uint8_t*>(buf), n);
}

}  // namespace hetccl
