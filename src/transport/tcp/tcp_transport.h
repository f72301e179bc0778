// TCP transport: one authenticated socket per peer, a poll()-driven progress
// loop over all transfers of a batch, receive-and-reduce through one bounded
// staging buffer.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "bootstrap/socket.h"
#include "secure/channel.h"
#include "transport/transport.h"

namespace hetccl {

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(const TransportContext& ctx);
  // Test hook (fuzzing the receive path, tampering relays): a transport over
  // sockets that are already connected, by peer rank; no bootstrap, listener
  // or handshake. Links that ctx.encrypt marks are keyed from `secret` and
  // all-zero nonces (the lower rank is the client).
  TcpTransport(const TransportContext& ctx, std::map<int, Socket> connected, std::span<const uint8_t> secret = {});
  const char* name() const override { return "tcp"; }
  void run(std::span<Xfer> xfers) override;
  // Shuts every connection down: the peers read end-of-stream at once.
  void poison(const std::string& why) override;

 private:
  struct PeerConn {
    Socket sock;
    std::string what;                            // "tcp peer rank N"
    std::unique_ptr<secure::RecordChannel> sec;  // encrypted link (HETCCL_ENCRYPT), else null
  };
  PeerConn& conn(int peer);
  void addConn(int peer, Socket s, std::span<const uint8_t> secret, std::span<const uint8_t> nonces, bool client);
  // Encrypted links: seals the send queue's data into records (as many at
  // once as threads_ seal) and writes them.
  struct Lane;
  bool pushSealed(PeerConn& c, Lane& lane);
  // Bytes received from the peer (plaintext), 0 when none are there now.
  static size_t pull(PeerConn& c, void* dst, size_t n);

  TransportContext ctx_;
  std::map<int, PeerConn> conns_;
  std::vector<uint8_t> staging_;
  int threads_ = 1;                         // threads that seal and open one link's records
  std::vector<secure::PlainRecord> batch_;  // pushSealed's records
};

}  // namespace hetccl
