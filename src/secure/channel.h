// Both directions of one encrypted connection (HETCCL_ENCRYPT) over a byte
// stream that the owner moves: outgoing records are sealed into a buffer and
// written through the owner's send function; incoming bytes are read through
// its receive function into the record opener, which authenticates each
// record before any of its bytes are handed on. Keys: both handshake nonces
// and the job secret, one key per direction. The tcp transport and the
// sealed bootstrap sockets are its two users.
#pragma once

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "secure/record.h"

namespace hetccl::secure {

class RecordChannel {
 public:
  // `client`: this end connected (it sends with the client key). `threads`:
  // threads that seal and open records (core/workers.h); `inHand`: records
  // the opener may read ahead (1 for streams whose later bytes are not
  // records).
  RecordChannel(const LinkKeys& keys, bool client, uint64_t rekeyRecords, const std::string& what, int threads = 1,
                size_t inHand = 1);

  // Sending: seal() only while nothing sealed waits (!pending()); it takes
  // the records (each 1 byte to kMaxRecordPlain) into the outgoing buffer.
  // flush() writes what sendSome(data, n) takes (0: not now) and returns the
  // bytes written.
  bool pending() const { return outOff_ < out_.size(); }
  void seal(std::span<const PlainRecord> records);
  // Plaintext bytes of what the last seal() took.
  size_t sealedPlain() const { return sealedPlain_; }
  template <class SendSome>
  size_t flush(SendSome&& sendSome) {
    size_t moved = 0;
    while (pending()) {
      size_t r = sendSome(out_.data() + outOff_, out_.size() - outOff_);
      if (r == 0) break;
      outOff_ += r;
      moved += r;
    }
    return moved;
  }
  int threads() const { return threads_; }

  // Receiving: up to n plaintext bytes of the records in hand (whole
  // records straight into dst where they fit); 0 when none are there.
  size_t take(uint8_t* dst, size_t n);
  // take(), reading through recvSome(room, n) (0: nothing now) until some
  // bytes authenticated or nothing more can be read now.
  template <class RecvSome>
  size_t recvSome(RecvSome&& recvSome, uint8_t* dst, size_t n) {
    for (;;) {
      if (size_t k = take(dst, n)) return k;
      std::span<uint8_t> room = opener_.space();
      size_t r = recvSome(room.data(), room.size());
      if (r == 0) return 0;
      opener_.filled(r);
    }
  }
  // For a blocking reader: the bytes to read next, and how many came.
  std::span<uint8_t> space() { return opener_.space(); }
  void filled(size_t n) { opener_.filled(n); }

 private:
  int threads_;
  RecordSealer sealer_;
  RecordOpener opener_;
  std::vector<uint8_t> out_;
  size_t outOff_ = 0;
  size_t sealedPlain_ = 0;
};

}  // namespace hetccl::secure
