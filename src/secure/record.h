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

class RecordSealer {
 public:
  explicit RecordSealer(const DirectionKey& k, uint64_t rekeyAfter = kDefaultRekeyRecords);
  // Seals the pieces (1 to kMaxRecordPlain bytes in all) as one record into
  // out, which has room for their total plus kRecordOverhead; returns the
  // record's size.
  size_t seal(std::span<const Aes256Gcm::Piece> pieces, uint8_t* out);
  uint64_t records() const { return total_; }

 private:
  DirectionKey k_;
  Aes256Gcm gcm_;
  uint64_t counter_ = 0, total_ = 0, rekeyAfter_;
};

// Reassembles records from the stream in order and authenticates and
// decrypts each: straight into the caller's buffer (openInto) where the
// whole record fits, else in place. Use: read into space() (never past the
// record in hand), report with filled(); then openInto(), or take from
// plain() and consume().
class RecordOpener {
 public:
  RecordOpener(const DirectionKey& k, std::string what, uint64_t rekeyAfter = kDefaultRekeyRecords);
  std::span<uint8_t> space();
  // Throws hetcclRemoteError naming `what` on a length out of range.
  void filled(size_t n);
  // The record in hand, once complete, whole into dst when it fits in `cap`
  // and none of it was taken yet: returns its length; else 0. plain() opens
  // it in place. Both throw hetcclRemoteError naming `what` on a record
  // that does not authenticate.
  size_t openInto(uint8_t* dst, size_t cap);
  std::span<const uint8_t> plain();
  void consume(size_t n);
  // Bytes of a record begun but not complete (a stream that ends here was
  // cut inside a record).
  bool midRecord() const { return have_ > 0 && !ready_ && plainLen_ == 0; }
  uint64_t records() const { return total_; }

 private:
  DirectionKey k_;
  Aes256Gcm gcm_;
  std::string what_;
  std::vector<uint8_t> buf_;
  size_t have_ = 0;       // bytes of the current record received
  size_t need_ = kRecordHeader;  // bytes the current record has in all (header first)
  bool ready_ = false;    // a whole record is in hand, not yet opened
  size_t plainOff_ = 0, plainLen_ = 0;
  void open(uint8_t* dst);
  uint64_t counter_ = 0, total_ = 0, rekeyAfter_;
};

}  // namespace hetccl::secure
