// The encrypted side of one tcp connection (HETCCL_ENCRYPT): payloads leave
// as AES-256-GCM records (secure/record.h) sealed into an outgoing buffer,
// and arrive through the record opener, which authenticates each record
// before any of its bytes are handed on. Keys: both handshake nonces and the
// job secret, one key per direction.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "secure/record.h"

namespace hetccl {

class SecureLink {
 public:
  // `client`: this end connected (it sends with the client key).
  SecureLink(const secure::LinkKeys& keys, bool client, uint64_t rekeyRecords, const std::string& what);

  // Sending: seal() only while nothing sealed waits (!pending()); it takes
  // the pieces (1 byte to kMaxRecordPlain in all) as one record. flush()
  // writes what it can without blocking and returns the bytes written.
  bool pending() const { return outOff_ < out_.size(); }
  void seal(std::span<const secure::Aes256Gcm::Piece> pieces);
  size_t flush(const Socket& s, const std::string& what);

  // Receiving: up to n plaintext bytes that authenticated; 0 when none can
  // be had now. Throws hetcclRemoteError on a record that fails.
  size_t recvSome(const Socket& s, uint8_t* dst, size_t n, const std::string& what);

 private:
  secure::RecordSealer sealer_;
  secure::RecordOpener opener_;
  std::vector<uint8_t> out_;
  size_t outOff_ = 0;
};

}  // namespace hetccl
