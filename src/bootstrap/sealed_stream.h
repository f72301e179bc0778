// A socket's encrypted side (Socket::seal): the blocking and non-blocking
// transfers of the bootstrap (rendezvous, ring) carried as AES-256-GCM
// records (secure/record.h). Records are sealed from the caller's bytes and
// authenticated whole before any byte is handed on.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "secure/record.h"

namespace hetccl {

class SealedStream {
 public:
  SealedStream(const secure::LinkKeys& keys, bool client, const std::string& what);

  void sendAll(const Socket& s, const void* buf, size_t n, const Deadline& dl, const std::string& what);
  void recvAll(const Socket& s, void* buf, size_t n, const Deadline& dl, const std::string& what);
  // See Socket::sendSome: 0 until the record sealed from buf is out.
  size_t sendSome(const Socket& s, const void* buf, size_t n, const std::string& what);
  size_t recvSome(const Socket& s, void* buf, size_t n, const std::string& what);

 private:
  // Seals up to one record of buf into out_; returns the plaintext taken.
  size_t sealOne(const void* buf, size_t n);
  // Takes what the opener holds (whole records straight into dst).
  size_t take(uint8_t* dst, size_t n);

  secure::RecordSealer sealer_;
  secure::RecordOpener opener_;
  std::vector<uint8_t> out_;
  size_t outOff_ = 0;
  size_t sealedLen_ = 0;  // sendSome: plaintext of the record in out_
};

}  // namespace hetccl
