// Encrypted messages whose records are told apart by their place, not by
// their order: for transports that deliver a message's parts in any order
// (the ucx transport's tagged parts). A part of a message is sealed as
// records of the stream format (secure/record.h: [u32 length][ciphertext]
// [tag], the length authenticated) whose IV is the direction's salt and
// (message within its key, part, record), so a record moved to another
// message, part or place, replayed, altered or cut fails to open. Every
// `messagesPerKey` messages both ends take the next key (HKDF from the
// direction's first key and the key's number), so no key meets an IV twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "secure/record.h"

namespace hetccl::secure {

class MessageCipher {
 public:
  // Parts hold at most this many records (IV: 16 bits of record number).
  static constexpr size_t kMaxRecordsPerPart = 65535;

  MessageCipher(const DirectionKey& k, bool encrypt, uint64_t messagesPerKey);
  ~MessageCipher();
  MessageCipher(const MessageCipher&) = delete;
  MessageCipher& operator=(const MessageCipher&) = delete;

  // Bytes of the sealed form of n plaintext bytes (n >= 1).
  static size_t sealedBytes(size_t n);

  // Seals n bytes (1 to kMaxRecordsPerPart records' worth) of message `msg`'s
  // part `part` into out (sealedBytes(n) of room), on up to `threads` threads.
  void seal(uint64_t msg, uint32_t part, const uint8_t* in, size_t n, uint8_t* out, int threads);
  // Opens the sealed form of n plaintext bytes into dst (n bytes). Returns
  // false where a record does not authenticate (dst then holds bytes that
  // must not be used).
  bool openInto(uint64_t msg, uint32_t part, const uint8_t* sealed, size_t n, uint8_t* dst, int threads) {
    return openEach(msg, part, const_cast<uint8_t*>(sealed), n, dst, threads, nullptr);
  }
  // Opens each record in place in `sealed`, then hands its plaintext to
  // use(offset, data, len) on the thread that opened it (records run on up
  // to `threads` threads). False as above; a record that does not
  // authenticate is never handed on.
  using Use = std::function<void(size_t off, const uint8_t* data, size_t len)>;
  bool openInPlace(uint64_t msg, uint32_t part, uint8_t* sealed, size_t n, int threads, const Use& use) {
    return openEach(msg, part, sealed, n, nullptr, threads, &use);
  }

 private:
  struct Key;
  bool openEach(uint64_t msg, uint32_t part, uint8_t* sealed, size_t n, uint8_t* dst, int threads, const Use* use);
  // The contexts of msg's key, at least `threads` of them.
  Key& keyFor(uint64_t msg, int threads);

  DirectionKey first_;
  bool encrypt_;
  uint64_t perKey_;
  std::unique_ptr<Key> key_;
};

}  // namespace hetccl::secure
