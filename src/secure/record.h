// Encrypted records on a byte stream. Each record is
//   [u32 plaintext length L, little-endian] [L bytes ciphertext] [16-byte tag]
// sealed with AES-256-GCM under the direction's key; the length is the
// additional data, so it cannot be changed either. The IV is the
// direction's 4-byte salt and a 64-bit record counter that both ends count
// and that never travels, so a replayed, reordered, dropped or altered
// record fails to authenticate. After `rekeyAfter` records both ends derive
// the next key from the current one (HKDF) and count from zero again, so a
// key never meets a repeated IV and never seals more than the limit.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "secure/aead.h"

namespace hetccl::secure {

constexpr size_t kRecordHeader = 4;
constexpr size_t kRecordOverhead = kRecordHeader + kTagBytes;
constexpr size_t kMaxRecordPlain = 256 * 1024;
// Records one key seals before the next key (64 GiB at the largest records).
constexpr uint64_t kDefaultRekeyRecords = uint64_t{1} << 18;

struct DirectionKey {
  std::array<uint8_t, kKeyBytes> key{};
  std::array<uint8_t, 4> salt{};
};

// The two directions' keys of one connection, from the job secret and both
// ends' handshake nonces: the connecting end sends with `client`, the
// accepting end with `server`. `purpose` separates uses ("transport",
// "bootstrap") so that no two streams share a key.
struct LinkKeys {
  DirectionKey client, server;
};
LinkKeys deriveLinkKeys(std::span<const uint8_t> secret, std::span<const uint8_t> nonces, std::string_view purpose);

// One direction's keys over time and a cipher context per thread in use:
// runs work on records in counter order, under one key at a time, rekeying
// (HKDF from the current key) after every `rekeyAfter` records.
class KeySchedule {
 public:
  KeySchedule(const DirectionKey& k, bool encrypt, uint64_t rekeyAfter);
  // Calls fn(gcm, i, iv) for records i in [0, n), the next n counters, on
  // up to `threads` threads (core/workers.h), no two at once on one
  // context. Returns the index of the first record whose fn returned false
  // (n when none did); the counters advance over all n either way.
  using RecordFn = std::function<bool(Aes256Gcm& gcm, size_t i, const uint8_t iv[kIvBytes])>;
  size_t each(size_t n, int threads, const RecordFn& fn);
  uint64_t total() const { return total_; }

 private:
  DirectionKey k_;
  bool encrypt_;
  std::vector<std::unique_ptr<Aes256Gcm>> gcm_;
  uint64_t counter_ = 0, total_ = 0, rekeyAfter_;
};

// The plaintext of one record: its pieces in order (unused ones empty),
// 1 to kMaxRecordPlain bytes in all.
struct PlainRecord {
  std::array<Aes256Gcm::Piece, 2> piece{};
  size_t bytes() const { return piece[0].len + piece[1].len; }
};

class RecordSealer {
 public:
  explicit RecordSealer(const DirectionKey& k, uint64_t rekeyAfter = kDefaultRekeyRecords);
  // Seals the pieces (1 to kMaxRecordPlain bytes in all) as one record into
  // out, which has room for their total plus kRecordOverhead; returns the
  // record's size.
  size_t seal(std::span<const Aes256Gcm::Piece> pieces, uint8_t* out);
  // Seals the records back to back into out (room for their bytes plus
  // kRecordOverhead each), on up to `threads` threads; returns the bytes
  // written.
  size_t sealAll(std::span<const PlainRecord> records, uint8_t* out, int threads);
  uint64_t records() const { return keys_.total(); }

 private:
  KeySchedule keys_;
  std::vector<size_t> at_;  // sealAll's record offsets
};

// Reassembles records from the stream in order and authenticates and
// decrypts each: straight into the caller's buffer (openInto) where whole
// records fit, else in place. It holds up to `inHand` records read ahead
// (1: it never reads past the record it is assembling, for streams whose
// later bytes are not records). Use: read into space(), report with
// filled(); then openInto(), or take from plain() and consume().
class RecordOpener {
 public:
  RecordOpener(const DirectionKey& k, std::string what, uint64_t rekeyAfter = kDefaultRekeyRecords, size_t inHand = 1);
  // Room to read into; empty while the records in hand fill the buffer.
  std::span<uint8_t> space();
  // Throws hetcclRemoteError naming `what` on a length out of range.
  void filled(size_t n);
  // The complete records in hand from the first, as many as fit whole in
  // `cap` (none of the first taken yet), opened into dst back to back on up
  // to `threads` threads: returns their plaintext length; 0 when the first
  // is not complete or does not fit. plain() opens the first in place. Both
  // throw hetcclRemoteError naming `what` and the record on one that does
  // not authenticate (no byte of the call's records may then be used).
  size_t openInto(uint8_t* dst, size_t cap, int threads = 1);
  std::span<const uint8_t> plain();
  void consume(size_t n);
  // Bytes of a record begun but not complete (a stream that ends here was
  // cut inside a record).
  bool midRecord() const { return tail_ > checked_; }
  uint64_t records() const { return keys_.total(); }

 private:
  size_t recordAt(size_t off) const;  // the size of the record whose header starts at off
  void dropFirst();                   // the first record is used up
  [[noreturn]] void failedAuth(uint64_t record) const;

  KeySchedule keys_;
  std::string what_;
  size_t inHand_;
  std::vector<uint8_t> buf_;
  size_t head_ = 0;                     // the first record not used up
  size_t checked_ = 0;                  // the end of the complete records in hand
  size_t tail_ = 0;                     // the end of the bytes received
  size_t complete_ = 0;                 // complete records in [head_, checked_)
  size_t plainOff_ = 0, plainLen_ = 0;  // the first record, opened in place: taken, in all
  std::vector<size_t> at_;              // openInto's record offsets
};

}  // namespace hetccl::secure
