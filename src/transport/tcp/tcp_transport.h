// TCP transport: one authenticated socket per peer, a poll()-driven progress
// loop over all transfers of a batch, receive-and-reduce through one bounded
// staging buffer.
#pragma once

#include <map>
#include <vector>

#include "bootstrap/socket.h"
#include "transport/transport.h"

namespace hetccl {

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(const TransportContext& ctx);
  // Test hook (fuzzing the receive path): a transport over sockets that are
  // already connected, by peer rank; no bootstrap, listener or handshake.
  TcpTransport(const TransportContext& ctx, std::map<int, Socket> connected);
  const char* name() const override { return "tcp"; }
  void run(std::span<Xfer> xfers) override;
  // Shuts every connection down: the peers read end-of-stream at once.
  void poison(const std::string& why) override;
  // The emulated GPU's device memory is this process's memory: moved as
  // host memory is (so the direct GPU path runs where no GPU is).
  bool movesDeviceMemory(const std::string& kind) const override { return kind == "emu"; }

 private:
  struct PeerConn {
    Socket sock;
    std::string what;  // "tcp peer rank N"
  };
  PeerConn& conn(int peer);

  TransportContext ctx_;
  std::map<int, PeerConn> conns_;
  std::vector<uint8_t> staging_;
};

}  // namespace hetccl
