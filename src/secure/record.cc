#include "secure/record.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "core/workers.h"

namespace hetccl::secure {
namespace {

void ivFor(const DirectionKey& k, uint64_t counter, uint8_t iv[kIvBytes]) {
  memcpy(iv, k.salt.data(), 4);
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(counter >> (56 - 8 * i));
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

KeySchedule::KeySchedule(const DirectionKey& k, bool encrypt, uint64_t rekeyAfter)
    : k_(k), encrypt_(encrypt), rekeyAfter_(std::max<uint64_t>(rekeyAfter, 1)) {
  gcm_.push_back(std::make_unique<Aes256Gcm>(k_.key, encrypt_));
}

size_t KeySchedule::each(size_t n, int threads, const RecordFn& fn) {
  size_t firstBad = n;
  for (size_t i = 0; i < n;) {
    if (counter_ == rekeyAfter_) {  // the next key, from the current one
      std::array<uint8_t, kKeyBytes> next;
      hkdfSha256(k_.key, {}, "hetccl record rekey", next);
      k_.key = next;
      for (auto& g : gcm_) g->setKey(k_.key);
      counter_ = 0;
    }
    const size_t m = static_cast<size_t>(std::min<uint64_t>(n - i, rekeyAfter_ - counter_));
    const size_t parts = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, m);
    while (gcm_.size() < parts) gcm_.push_back(std::make_unique<Aes256Gcm>(k_.key, encrypt_));
    const uint64_t base = counter_;
    auto part = [&](size_t t, std::atomic<size_t>* bad) {
      for (size_t j = t; j < m; j += parts) {
        uint8_t iv[kIvBytes];
        ivFor(k_, base + j, iv);
        if (!fn(*gcm_[t], i + j, iv)) {
          size_t seen = bad->load();
          while (i + j < seen && !bad->compare_exchange_weak(seen, i + j)) {
          }
        }
      }
    };
    std::atomic<size_t> bad{n};
    if (parts == 1)
      part(0, &bad);
    else
      runParts(static_cast<int>(parts), [&](int t) { part(static_cast<size_t>(t), &bad); });
    firstBad = std::min(firstBad, bad.load());
    counter_ += m;
    total_ += m;
    i += m;
  }
  return firstBad;
}

RecordSealer::RecordSealer(const DirectionKey& k, uint64_t rekeyAfter) : keys_(k, true, rekeyAfter) {}

size_t RecordSealer::seal(std::span<const Aes256Gcm::Piece> pieces, uint8_t* out) {
  if (pieces.size() > 2) throwError(hetcclInternalError, "a record is sealed from at most 2 pieces");
  PlainRecord r;
  for (size_t i = 0; i < pieces.size(); ++i) r.piece[i] = pieces[i];
  return sealAll({&r, 1}, out, 1);
}

size_t RecordSealer::sealAll(std::span<const PlainRecord> records, uint8_t* out, int threads) {
  std::vector<size_t>& at = at_;  // record i's offset in out, reused across calls
  at.assign(records.size() + 1, 0);
  for (size_t i = 0; i < records.size(); ++i) {
    const size_t len = records[i].bytes();
    if (len == 0 || len > kMaxRecordPlain)
      throwError(hetcclInternalError,
                 "record of " + std::to_string(len) + " bytes (1 to " + std::to_string(kMaxRecordPlain) + " allowed)");
    at[i + 1] = at[i] + len + kRecordOverhead;
  }
  keys_.each(records.size(), threads, [&](Aes256Gcm& gcm, size_t i, const uint8_t iv[kIvBytes]) {
    uint8_t* rec = out + at[i];
    const size_t len = records[i].bytes();
    const uint32_t l32 = static_cast<uint32_t>(len);
    for (int b = 0; b < 4; ++b) rec[b] = static_cast<uint8_t>(l32 >> (8 * b));
    gcm.seal(iv, {rec, kRecordHeader}, records[i].piece, rec + kRecordHeader, rec + kRecordHeader + len);
    return true;
  });
  return at.back();
}

RecordOpener::RecordOpener(const DirectionKey& k, std::string what, uint64_t rekeyAfter, size_t inHand)
    : keys_(k, false, rekeyAfter),
      what_(std::move(what)),
      inHand_(std::max<size_t>(inHand, 1)),
      buf_(inHand_ * (kMaxRecordPlain + kRecordOverhead)) {}

size_t RecordOpener::recordAt(size_t off) const {
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(buf_[off + i]) << (8 * i);
  return kRecordHeader + len + kTagBytes;
}

std::span<uint8_t> RecordOpener::space() {
  if (inHand_ == 1) {  // only the rest of the record being assembled
    if (complete_ > 0) return {};
    const size_t have = tail_ - checked_;
    const size_t need = have < kRecordHeader ? kRecordHeader : recordAt(checked_);
    return {buf_.data() + tail_, need - have};
  }
  if (head_ > 0 && buf_.size() - tail_ < kMaxRecordPlain + kRecordOverhead) {
    memmove(buf_.data(), buf_.data() + head_, tail_ - head_);  // offsets below stay relative to head_
    checked_ -= head_;
    tail_ -= head_;
    head_ = 0;
  }
  return {buf_.data() + tail_, buf_.size() - tail_};
}

void RecordOpener::filled(size_t n) {
  tail_ += n;
  while (tail_ - checked_ >= kRecordHeader) {
    const size_t len = recordAt(checked_) - kRecordOverhead;
    if (len == 0 || len > kMaxRecordPlain)
      throwError(hetcclRemoteError, what_ + ": encrypted stream broken (record " +
                                        std::to_string(keys_.total() + complete_) + " announces " +
                                        std::to_string(len) + " bytes; tampered or out of step)");
    if (tail_ - checked_ < len + kRecordOverhead) break;
    checked_ += len + kRecordOverhead;
    ++complete_;
  }
}

void RecordOpener::failedAuth(uint64_t record) const {
  throwError(hetcclRemoteError, what_ + ": encrypted record " + std::to_string(record) +
                                    " failed authentication (altered, replayed, reordered or dropped data, or a "
                                    "peer with another key)");
}

void RecordOpener::dropFirst() {
  head_ += recordAt(head_);
  --complete_;
  plainOff_ = plainLen_ = 0;
  if (head_ == tail_) head_ = checked_ = tail_ = 0;
}

size_t RecordOpener::openInto(uint8_t* dst, size_t cap, int threads) {
  if (plainLen_ > 0) return 0;
  std::vector<size_t>& at = at_;  // the records' offsets in buf_, reused across calls
  at.assign(1, head_);
  size_t total = 0;
  for (size_t k = 0; k < complete_; ++k) {
    const size_t len = recordAt(at.back()) - kRecordOverhead;
    if (total + len > cap) break;
    total += len;
    at.push_back(at.back() + len + kRecordOverhead);
  }
  const size_t n = at.size() - 1;
  if (n == 0) return 0;
  const uint64_t first = keys_.total();
  size_t bad = keys_.each(n, threads, [&](Aes256Gcm& gcm, size_t i, const uint8_t iv[kIvBytes]) {
    const uint8_t* rec = buf_.data() + at[i];
    const size_t len = at[i + 1] - at[i] - kRecordOverhead;
    return gcm.open(iv, {rec, kRecordHeader}, rec + kRecordHeader, len, dst + (at[i] - head_) - i * kRecordOverhead,
                    rec + kRecordHeader + len);
  });
  if (bad < n) failedAuth(first + bad);
  for (size_t i = 0; i < n; ++i) dropFirst();
  return total;
}

std::span<const uint8_t> RecordOpener::plain() {
  if (plainLen_ == 0 && complete_ > 0) {
    uint8_t* rec = buf_.data() + head_;
    const size_t len = recordAt(head_) - kRecordOverhead;
    const uint64_t record = keys_.total();
    if (keys_.each(1, 1, [&](Aes256Gcm& gcm, size_t, const uint8_t iv[kIvBytes]) {
          return gcm.open(iv, {rec, kRecordHeader}, rec + kRecordHeader, len, rec + kRecordHeader,
                          rec + kRecordHeader + len);
        }) == 0)
      failedAuth(record);
    plainOff_ = 0;
    plainLen_ = len;
  }
  return {buf_.data() + head_ + kRecordHeader + plainOff_, plainLen_ - plainOff_};
}

void RecordOpener::consume(size_t n) {
  if (n == 0) return;
  plainOff_ += n;
  if (plainOff_ == plainLen_) dropFirst();
}

}  // namespace hetccl::secure
