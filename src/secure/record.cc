#include "secure/record.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace hetccl::secure {
namespace {

void ivFor(const DirectionKey& k, uint64_t counter, uint8_t iv[kIvBytes]) {
  memcpy(iv, k.salt.data(), 4);
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
}

// The next key of a direction, from the current one.
void rekey(DirectionKey& k, Aes256Gcm& gcm) {
  std::array<uint8_t, kKeyBytes> next;
  hkdfSha256(k.key, {}, "hetccl record rekey", next);
  k.key = next;
  gcm.setKey(k.key);
}

}  // namespace

LinkKeys deriveLinkKeys(std::span<const uint8_t> secret, std::span<const uint8_t> nonces, std::string_view purpose) {
  // One expansion gives both directions: client key+salt, server key+salt.
  std::array<uint8_t, 2 * (kKeyBytes + 4)> okm;
  const std::string info = "hetccl v1 link keys: " + std::string(purpose);
  hkdfSha256(secret, nonces, info, okm);
  LinkKeys l;
  const uint8_t* p = okm.data();
  memcpy(l.client.key.data(), p, kKeyBytes);
  memcpy(l.client.salt.data(), p + kKeyBytes, 4);
  p += kKeyBytes + 4;
  memcpy(l.server.key.data(), p, kKeyBytes);
  memcpy(l.server.salt.data(), p + kKeyBytes, 4);
  return l;
}

RecordSealer::RecordSealer(const DirectionKey& k, uint64_t rekeyAfter)
    : k_(k), gcm_(k_.key, true), rekeyAfter_(std::max<uint64_t>(rekeyAfter, 1)) {}

size_t RecordSealer::seal(std::span<const Aes256Gcm::Piece> pieces, uint8_t* out) {
  size_t len = 0;
  for (const auto& p : pieces) len += p.len;
  if (len == 0 || len > kMaxRecordPlain)
    throwError(hetcclInternalError, "record of " + std::to_string(len) + " bytes (1 to " +
                                        std::to_string(kMaxRecordPlain) + " allowed)");
  if (counter_ == rekeyAfter_) {
    rekey(k_, gcm_);
    counter_ = 0;
  }
  const uint32_t l32 = static_cast<uint32_t>(len);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(l32 >> (8 * i));
  uint8_t iv[kIvBytes];
  ivFor(k_, counter_, iv);
  gcm_.seal(iv, {out, kRecordHeader}, pieces, out + kRecordHeader, out + kRecordHeader + len);
  ++counter_;
  ++total_;
  return len + kRecordOverhead;
}

RecordOpener::RecordOpener(const DirectionKey& k, std::string what, uint64_t rekeyAfter)
    : k_(k), gcm_(k_.key, false), what_(std::move(what)), buf_(kMaxRecordPlain + kRecordOverhead),
      rekeyAfter_(std::max<uint64_t>(rekeyAfter, 1)) {}

std::span<uint8_t> RecordOpener::space() {
  if (ready_ || plainLen_ > 0) return {};  // the record in hand is not taken yet
  return {buf_.data() + have_, need_ - have_};
}

void RecordOpener::filled(size_t n) {
  have_ += n;
  if (have_ < need_) return;
  if (need_ == kRecordHeader) {
    uint32_t len = 0;
    for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(buf_[i]) << (8 * i);
    if (len == 0 || len > kMaxRecordPlain)
      throwError(hetcclRemoteError, what_ + ": encrypted stream broken (record " + std::to_string(total_) +
                                        " announces " + std::to_string(len) + " bytes; tampered or out of step)");
    need_ = kRecordHeader + len + kTagBytes;
    return;
  }
  ready_ = true;
}

void RecordOpener::open(uint8_t* dst) {
  const size_t len = need_ - kRecordOverhead;
  if (counter_ == rekeyAfter_) {
    rekey(k_, gcm_);
    counter_ = 0;
  }
  uint8_t iv[kIvBytes];
  ivFor(k_, counter_, iv);
  const uint8_t* body = buf_.data() + kRecordHeader;
  if (!gcm_.open(iv, {buf_.data(), kRecordHeader}, body, len, dst, body + len))
    throwError(hetcclRemoteError, what_ + ": encrypted record " + std::to_string(total_) +
                                      " failed authentication (altered, replayed, reordered or dropped data, or a "
                                      "peer with another key)");
  ++counter_;
  ++total_;
  ready_ = false;
}

size_t RecordOpener::openInto(uint8_t* dst, size_t cap) {
  const size_t len = need_ - kRecordOverhead;
  if (!ready_ || cap < len) return 0;
  open(dst);
  have_ = 0;
  need_ = kRecordHeader;
  return len;
}

std::span<const uint8_t> RecordOpener::plain() {
  if (ready_) {
    open(buf_.data() + kRecordHeader);
    plainOff_ = 0;
    plainLen_ = need_ - kRecordOverhead;
  }
  return {buf_.data() + kRecordHeader + plainOff_, plainLen_ - plainOff_};
}

void RecordOpener::consume(size_t n) {
  if (n == 0) return;
  plainOff_ += n;
  if (plainOff_ < plainLen_) return;
  plainOff_ = plainLen_ = 0;
  have_ = 0;
  need_ = kRecordHeader;
}

}  // namespace hetccl::secure
