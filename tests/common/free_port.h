// A port P such that P and P+1 are free now on every address: MASTER_PORT
// for a launcher-style job (hetccl's root listens on MASTER_PORT+1, next to
// torchrun's own store on MASTER_PORT). 0 if none was found. Shared by the
// mp and fault test harnesses.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace hetccl_test {

inline bool portBindable(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(port);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

inline uint16_t freePortPair() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    socklen_t len = sizeof(a);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    uint16_t p = ntohs(a.sin_port);
    if (p < 65535 && portBindable(p) && portBindable(static_cast<uint16_t>(p + 1))) return p;
  }
  return 0;
}

}  // namespace hetccl_test
