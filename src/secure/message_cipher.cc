#include "secure/message_cipher.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "core/workers.h"

namespace hetccl::secure {

struct MessageCipher::Key {
  uint64_t number = ~uint64_t{0};
  DirectionKey k;
  std::vector<std::unique_ptr<Aes256Gcm>> gcm;
};

MessageCipher::MessageCipher(const DirectionKey& k, bool encrypt, uint64_t messagesPerKey)
    : first_(k),
      encrypt_(encrypt),
      perKey_(std::clamp<uint64_t>(messagesPerKey, 1, uint64_t{1} << 32)),
      key_(std::make_unique<Key>()) {}

MessageCipher::~MessageCipher() = default;

size_t MessageCipher::sealedBytes(size_t n) {
  const size_t records = (n + kMaxRecordPlain - 1) / kMaxRecordPlain;
  return n + records * kRecordOverhead;
}

MessageCipher::Key& MessageCipher::keyFor(uint64_t msg, int threads) {
  Key& key = *key_;
  const uint64_t number = msg / perKey_;
  if (key.number != number) {
    key.k = first_;
    if (number > 0) {  // key n: HKDF over the first key with n as the salt
      uint8_t salt[8];
      for (int i = 0; i < 8; ++i) salt[i] = static_cast<uint8_t>(number >> (56 - 8 * i));
      hkdfSha256(first_.key, salt, "hetccl message key", key.k.key);
    }
    for (auto& g : key.gcm) g->setKey(key.k.key);
    key.number = number;
  }
  while (key.gcm.size() < static_cast<size_t>(std::max(threads, 1)))
    key.gcm.push_back(std::make_unique<Aes256Gcm>(key.k.key, encrypt_));
  return key;
}

namespace {

// The IV of record r of part p of message m: salt, then (m within its key,
// p, r) as 32 + 16 + 16 bits.
void ivAt(const DirectionKey& k, uint64_t msgInKey, uint32_t part, size_t record, uint8_t iv[kIvBytes]) {
  memcpy(iv, k.salt.data(), 4);
  const uint64_t c = (msgInKey << 32) | (static_cast<uint64_t>(part & 0xFFFF) << 16) | (record & 0xFFFF);
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(c >> (56 - 8 * i));
}

size_t recordCount(size_t n) { return (n + kMaxRecordPlain - 1) / kMaxRecordPlain; }

void checkPart(size_t n, uint32_t part) {
  if (n == 0 || recordCount(n) > MessageCipher::kMaxRecordsPerPart || part > 0xFFFF)
    throwError(hetcclInternalError, "message part " + std::to_string(part) + " of " + std::to_string(n) +
                                        " bytes cannot be sealed (1 byte to 16 GiB, parts below 65536)");
}

// Runs fn(thread, record) for records [0, n) on up to `threads` threads.
template <class F>
void eachRecord(size_t n, int threads, F&& fn) {
  const int parts = static_cast<int>(std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1, n));
  if (parts == 1) {
    for (size_t r = 0; r < n; ++r) fn(0, r);
    return;
  }
  runParts(parts, [&](int t) {
    for (size_t r = static_cast<size_t>(t); r < n; r += static_cast<size_t>(parts)) fn(t, r);
  });
}

}  // namespace

void MessageCipher::seal(uint64_t msg, uint32_t part, const uint8_t* in, size_t n, uint8_t* out, int threads) {
  checkPart(n, part);
  const size_t records = recordCount(n);
  Key& key = keyFor(msg, std::min<int>(threads, static_cast<int>(records)));
  const uint64_t inKey = msg % perKey_;
  eachRecord(records, static_cast<int>(key.gcm.size()), [&](int t, size_t r) {
    const size_t off = r * kMaxRecordPlain, len = std::min(kMaxRecordPlain, n - off);
    uint8_t* rec = out + r * (kMaxRecordPlain + kRecordOverhead);
    const uint32_t l32 = static_cast<uint32_t>(len);
    for (int b = 0; b < 4; ++b) rec[b] = static_cast<uint8_t>(l32 >> (8 * b));
    uint8_t iv[kIvBytes];
    ivAt(key.k, inKey, part, r, iv);
    const Aes256Gcm::Piece piece{in + off, len};
    key.gcm[static_cast<size_t>(t)]->seal(iv, {rec, kRecordHeader}, {&piece, 1}, rec + kRecordHeader,
                                          rec + kRecordHeader + len);
  });
}

bool MessageCipher::openEach(uint64_t msg, uint32_t part, uint8_t* sealed, size_t n, uint8_t* dst, int threads,
                             const Use* use) {
  checkPart(n, part);
  const size_t records = recordCount(n);
  Key& key = keyFor(msg, std::min<int>(threads, static_cast<int>(records)));
  const uint64_t inKey = msg % perKey_;
  std::atomic<bool> good{true};
  eachRecord(records, static_cast<int>(key.gcm.size()), [&](int t, size_t r) {
    const size_t off = r * kMaxRecordPlain, len = std::min(kMaxRecordPlain, n - off);
    uint8_t* rec = sealed + r * (kMaxRecordPlain + kRecordOverhead);
    uint32_t l32 = 0;
    for (int b = 0; b < 4; ++b) l32 |= static_cast<uint32_t>(rec[b]) << (8 * b);
    uint8_t iv[kIvBytes];
    ivAt(key.k, inKey, part, r, iv);
    // The length is the one this place must hold (authenticated as well).
    uint8_t* out = dst ? dst + off : rec + kRecordHeader;
    if (l32 != len || !key.gcm[static_cast<size_t>(t)]->open(iv, {rec, kRecordHeader}, rec + kRecordHeader, len, out,
                                                             rec + kRecordHeader + len)) {
      good.store(false);
      return;
    }
    if (use) (*use)(off, out, len);
  });
  return good.load();
}

}  // namespace hetccl::secure
