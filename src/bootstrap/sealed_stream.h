// A socket's encrypted side (Socket::seal): the blocking and non-blocking
// transfers of the bootstrap (rendezvous, ring) carried as AES-256-GCM
// records (secure/channel.h) over the socket's raw transfers. Records are
// sealed from the caller's bytes and authenticated whole before any byte is
// handed on.
#pragma once

#include <string>

#include "bootstrap/socket.h"
#include "secure/channel.h"

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
  // Seals up to one record of buf; returns the plaintext taken.
  size_t sealOne(const void* buf, size_t n);

  secure::RecordChannel ch_;
  bool sealed_ = false;  // sendSome: a record sealed from the caller's bytes is on its way
};

}  // namespace hetccl
