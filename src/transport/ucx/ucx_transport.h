// UCX transport: UCP tagged messages between the ranks' workers, so the same
// code runs over UCX's shared-memory and tcp transports on one machine and
// over InfiniBand/RoCE on a cluster (UCX_TLS, UCX_NET_DEVICES choose).
//
// One UCP context and worker per transport; endpoints to every peer from
// worker addresses exchanged over the bootstrap, with peer error handling (a
// peer that dies fails its pending requests instead of hanging them). Each
// transfer is a 32-byte header (its MsgTag, checked by the receiver before any
// payload is accepted) followed by the payload in parts of at most 4 MiB. The
// 64-bit UCP tag is [sender rank:16][message number:32][part:16], message
// numbers counting per (sender, receiver) pair, so matching is exact and in
// order. Receive-reduce parts land in a bounded staging ring and are folded
// as they complete. Buffers are host memory (GPU ranks' data crosses through
// the device border's mirrors or pinned staging).
//
// Encrypted links (TransportContext::encrypt): every message to or from the
// peer is sealed (secure/message_cipher.h), its header as part 0 and each
// payload part as the records of its part number, so parts may complete in
// any order; keys per direction from the job secret and both ranks'
// nonces (exchanged at init). Sends seal into bounded staging slots and go
// out as they are sealed; receives land in the receive slots and are opened
// into the buffer (or folded, for receive-reduce). Such links take tagged
// parts only (no RMA put, no device memory: GPU ranks stage through host
// memory).
//
// With HETCCL_UCX_RMA_MIN set (the same on every rank, checked at init),
// messages of that size and up wait for the receiver's offer (part
// kRtrPart), sent once it has checked the header. A plain receive registers
// its buffer (ucp_mem_map) and offers its address and packed rkey: the
// sender puts the payload there, flushes the endpoint and sends a finish
// message (part kFinPart). A receive-reduce asks for parts instead. A
// receiver that refuses the message (another call) says so, and the sender
// fails at once rather than at its timeout.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/progress.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_api.h"

namespace hetccl {
namespace secure {
class MessageCipher;
}

class UcxTransport : public Transport {
 public:
  explicit UcxTransport(const TransportContext& ctx);
  ~UcxTransport() override;
  const char* name() const override { return "ucx"; }
  void run(std::span<Xfer> xfers) override;

  // The peer whose endpoint reported an error (UCX's error callback).
  void peerFailed(int peer, ucs_status_t status);
  struct EpArg {  // the error callback's argument
    UcxTransport* t;
    int peer;
  };

 private:
  struct Op;
  struct Rma;
  struct Run;
  void post(Op& op);
  // run()'s steps (ucx_run.cc): every header posted (and a send's parts or
  // its wait for the receiver's offer), then progress until every op is
  // done, handling each as it completes.
  void postHeaders(Run& r);
  void progressUntilDone(Run& r);
  // Sent after the receiver's offer (the RMA path; never on an encrypted link).
  bool offered(const Xfer& x) const { return rmaMin_ && x.bytes >= rmaMin_ && !sealed(x.peer); }
  // Appends (and posts, or queues for a staging slot) the payload parts of x.
  void addParts(Run& r, Xfer& x, uint64_t msg);
  // What a completed op leads to: a received header checked and its
  // payload's parts or offer, an offer's parts, a staging slot returned.
  bool afterCompletion(Run& r, Op& op);
  // Parts waiting for a slot take the slots free now (encrypted sends are sealed then).
  bool fillSlots(Run& r);
  bool allDone(const Run& r) const;
  // No progress: a peer that died or failed, or the timeout, ends the run.
  void checkPeers(const Run& r, const Xfer& pending, std::chrono::steady_clock::time_point* lastAliveCheck,
                  ProgressWatch& watch);
  // RMA path (ucx_rma.cc): the receiver's offer after a good header, the
  // sender's put once the offer arrives, the refusal of a mismatched one.
  void offerBuffer(Xfer& x, uint64_t msg, Rma& rma, std::vector<Op>& ops);
  void offerParts(Xfer& x, uint64_t msg, Rma& rma, std::vector<Op>& ops);
  // Appends and posts one message of the offer protocol: kind is Op::kRtrSend
  // (len bytes of rma.wire), Op::kRtrRecv (into rma.wire) or Op::kFinRecv.
  void postOfferOp(std::vector<Op>& ops, int kind, Xfer& x, uint64_t msg, Rma& rma, size_t len);
  void acceptOffer(Op& op);
  void refuseOffer(int peer, uint64_t msg);
  void finish(Op& op, ucs_status_t st);
  void cancelAll(std::vector<Op>& ops);
  void closeEndpoints();
  // Progresses until every request completes (then frees it), at most 2 s;
  // what is left did not complete.
  void drainRequests(std::vector<void*>& reqs);
  // Progresses until the request completes (then frees it: true) or the
  // deadline passes (then cancels and drains it: false).
  bool waitOrCancel(void* req, std::chrono::steady_clock::time_point until);
  // Receives and drops a mismatched message's payload (bounded in time).
  void discard(int peer, uint64_t msg, uint64_t bytes);
  // Encrypted links: keys from the job secret and every rank's nonce.
  void setUpSealing(const std::vector<std::array<uint8_t, 16>>& nonces);
  bool sealed(int peer) const { return peer >= 0 && static_cast<size_t>(peer) < sealTo_.size() && sealTo_[peer]; }
  // Wire bytes of a payload part of `plain` bytes to or from `peer`.
  size_t wireBytes(int peer, size_t plain) const;
  // An encrypted part that arrived: opened into the buffer or folded.
  void openPart(Op& op);

  const ucx::UcxApi& api_;
  TransportContext ctx_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;                // by rank
  std::vector<uint64_t> sendSeq_, recvSeq_;  // message numbers by peer
  std::vector<ucs_status_t> failed_;         // UCS_OK, or the error an endpoint reported
  std::vector<uint8_t> staging_;             // receive slots: receive-reduce parts, encrypted parts
  std::vector<uint8_t> sendStaging_;         // send slots: encrypted parts (empty where no link is)
  std::vector<std::unique_ptr<secure::MessageCipher>> sealTo_, openFrom_;  // by rank; null: plaintext
  int threads_ = 1;                                                        // sealing and opening (HETCCL_HOST_THREADS)
  std::vector<EpArg> epArgs_;                                              // by rank
  std::vector<int> localPid_;  // by rank: pid of a peer on this host, else 0
  uint64_t memTypes_ = 0;      // ucp_context_query: bits of ucs_memory_type_t
  uint64_t rmaMin_ = 0;        // HETCCL_UCX_RMA_MIN; 0: no RMA path
};

}  // namespace hetccl
