// Net transport: the links of an installed NCCL network plugin (net_plugin.h)
// carry hetccl's messages, so a fabric NCCL reaches through a plugin (EFA and
// Slingshot through aws-ofi-nccl, Google's TCPX/gIB plugins, HPC-X's UCX
// plugin) carries cross-vendor traffic with no fabric code of hetccl's.
// Chosen only by name (HETCCL_TRANSPORT=inter=net, or net for every link).
//
// Per peer, one connection each way: the receiver listens, its handle goes
// to the sender through the bootstrap, the sender connects and the receiver
// accepts, both without blocking. Each side registers (regMr, host memory)
// staging slots once: kSlots of partBytes each way. A message is a header
// (its MsgTag, checked before any payload receive is posted, so nothing past
// what was announced is read) and then parts of at most partBytes, each
// copied (or sealed) into a send slot and sent with isend, received with
// irecv of exactly its size into a receive slot (flushed first where the
// plugin's forceFlush asks), then copied, opened or folded into place. The
// plugin's tag is [message number:14][part:16]; a connection delivers in
// order. Encrypted links seal the header as part 0 and each payload part
// under its own number (secure/message_cipher.h), keys from the job secret
// and both ranks' nonces.
//
// A dead peer: the plugin's failed test() names it, peers on this host are
// checked by pid, and otherwise the no-progress timeout names it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/net_plugin.h"
#include "transport/transport.h"

namespace hetccl {
namespace secure {
class MessageCipher;
}

class NetTransport : public Transport {
 public:
  explicit NetTransport(const TransportContext& ctx);
  ~NetTransport() override;
  const char* name() const override { return "net"; }
  void run(std::span<Xfer> xfers) override;
  // Ends this rank's waits at once (the plugin has no way to tell the peers:
  // they reach their timeout or see the connection fail).
  void poison(const std::string& why) override;

  static constexpr int kSlots = 4;  // staging slots per connection and direction

 private:
  struct Staging {
    uint8_t* mem = nullptr;  // kSlots x slotBytes_, page-aligned
    void* mr = nullptr;
    uint8_t* slot(int i, size_t slotBytes) const { return mem + static_cast<size_t>(i) * slotBytes; }
  };
  struct Peer {
    int rank = -1;
    void* listenComm = nullptr;
    void* sendComm = nullptr;
    void* recvComm = nullptr;
    Staging send, recv;
    uint64_t sendSeq = 0, recvSeq = 0;  // message numbers
    std::unique_ptr<secure::MessageCipher> sealTo, openFrom;
    int pid = 0;  // on this host, else 0
  };
  struct Run;
  struct Op;
  // Set up (net_transport.cc): connections, staging, keys.
  void connectAll(const std::vector<uint8_t>& handles);
  void setUp(Peer& p);
  void closeAll();
  // run()'s steps (net_run.cc).
  bool progressSends(Run& r, Peer& p);
  bool progressRecvs(Run& r, Peer& p);
  bool postRecv(Run& r, Peer& p);
  bool completeRecv(Run& r, Peer& p, Op& op);
  void deliver(Peer& p, Op& op);
  size_t wireBytes(const Peer& p, size_t plain) const;
  Peer& peer(int rank);
  [[noreturn]] void failed(const char* call, int r, const Peer& p, const Xfer& x, bool sending) const;
  void checkAlive(const Run& r) const;

  TransportContext ctx_;
  std::shared_ptr<NetPlugin> plugin_;
  void* pluginCtx_ = nullptr;
  int dev_ = 0;
  NetDeviceProps props_;
  size_t partBytes_ = 0;  // plaintext per payload part
  size_t slotBytes_ = 0;  // a part or a header, sealed or not
  std::vector<Peer> peers_;
  std::vector<int> index_;  // peer slot by rank, -1: none
  int threads_ = 1;         // sealing and opening
  std::atomic<bool> poisoned_{false};
  std::mutex poisonMu_;
  std::string poisonWhy_;  // set once, before poisoned_
};

}  // namespace hetccl
