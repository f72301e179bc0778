// ofi transport: libfabric's reliable datagram endpoints (FI_EP_RDM) and
// tagged messages, for the fabrics only libfabric reaches (AWS EFA, HPE
// Slingshot's cxi) and any other provider it offers (verbs, tcp, shm).
//
// One fabric, domain, address vector, completion queue and endpoint per
// transport; endpoint names exchanged over the bootstrap. Each transfer is a
// 32-byte header (its MsgTag, checked by the receiver before it posts any
// payload receive) followed by the payload in parts of at most 4 MiB (less
// where the provider's largest message is smaller). Receives are directed
// (FI_DIRECTED_RECV: matched on the peer's address too), so the 48-bit tag is
// [message number:32][part:16], message numbers counting per (sender,
// receiver) pair: matching is exact, and a receive takes exactly the bytes
// its header announced (a longer message fails it, FI_ETRUNC). Completions
// are read from the queue by run()'s loop, which never blocks: a full send or
// receive queue (-FI_EAGAIN) leaves the operation queued until completions
// free room. Receive-reduce parts land in a bounded staging ring and are
// folded as they complete.
//
// Memory registration: where the provider asks for local registration
// (FI_MR_LOCAL: efa), run() registers each transfer's buffer for the run and
// its staging once at init (on the endpoint where FI_MR_ENDPOINT says so:
// cxi), and closes the run's registrations when it returns. Providers that
// pin memory (efa, cxi) keep their own registration cache, which watches for
// memory given back to the system; a cache above it would keep stale
// registrations of freed buffers, so hetccl keeps none of user memory.
// Keys come from the provider where it says FI_MR_PROV_KEY. Only host memory
// is handed to the provider: FI_HMEM (device memory) is not asked for, and
// could not be tried here (no EFA or Slingshot machine).
//
// RMA writes (HETCCL_OFI_RMA_MIN, the same on every rank, checked at init):
// where every rank's provider offers FI_RMA, messages of that size and up
// on a plaintext link take the rendezvous path instead of tagged parts. The
// receiver, once the header has arrived and matched, answers with an offer
// (part kOfferPart): a plain receive registers its buffer for remote writes
// (FI_REMOTE_WRITE; ofi_mr_cache.h says when a registration is reused) and
// offers its address (or offset, without FI_MR_VIRT_ADDR), length and key;
// a receive-reduce asks for tagged parts. The sender checks that the offered
// length is the one its header announced, writes the payload in parts
// within it (fi_writemsg, FI_DELIVERY_COMPLETE: the bytes are in the
// receiver's memory when the write completes), then sends a finish message
// (part kFinPart) carrying the bytes written, which the receiver checks.
// Both sides decide from the size alone, so a plain receive costs no round
// trip beyond the offer. A receiver whose header check fails refuses the
// offer, so the sender fails at once too. Sealed links never take it: the written bytes would
// cross in the clear. A run that fails closes the registrations of its
// receives, so a late write from a peer fails rather than lands in a
// buffer given back to the caller. Where any rank lacks FI_RMA all ranks
// keep to tagged parts, and say so in the log.
//
// Encrypted links (TransportContext::encrypt) seal every message as the ucx
// transport does (secure/message_cipher.h): the header as part 0, each
// payload part as its part's records, into bounded send slots; received
// parts are opened from the receive slots into the buffer or folded.
//
// A dead peer: an error completion (the provider saw the connection fail)
// names it at once; a peer on this host that the run still waits on is
// checked by its pid (one that did its part and exited is no failure);
// otherwise the no-progress timeout names it (HETCCL_TIMEOUT_S).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rdma/fabric.h>

#include "transport/ofi/ofi_api.h"
#include "transport/ofi/ofi_mr_cache.h"
#include "transport/progress.h"
#include "transport/transport.h"

namespace hetccl {
namespace secure {
class MessageCipher;
}

class OfiTransport : public Transport {
 public:
  explicit OfiTransport(const TransportContext& ctx);
  ~OfiTransport() override;
  const char* name() const override { return "ofi"; }
  void run(std::span<Xfer> xfers) override;
  // The provider's name ("tcp;ofi_rxm", "efa") and whether it asked for local registration.
  const std::string& provider() const { return provider_; }

 private:
  struct Op;
  struct Rma;
  struct Run;
  void openEndpoint();
  void exchangeAddresses();
  void close();
  // run()'s steps (ofi_run.cc).
  void postHeaders(Run& r);
  void addParts(Run& r, Xfer& x, uint64_t msg);
  // Posts op (true), or leaves it queued on -FI_EAGAIN (false); throws on other errors.
  bool post(Run& r, Op& op);
  void postBacklog(Run& r);
  void fillSlots(Run& r);
  void completed(Run& r, Op& op);
  void checkHeader(Run& r, Op& op);
  // The RMA path (ofi_rma.cc).
  bool offered(const Xfer& x) const { return rmaMin_ && x.bytes >= rmaMin_ && !sealed(x.peer); }
  void postOfferOp(Run& r, Xfer& x, uint64_t msg, int kind);
  void offer(Run& r, Xfer& x, uint64_t msg);
  void acceptOffer(Run& r, Op& op);
  // The header of message msg from peer did not match: where the sender
  // waits for an offer, tell it at once (an inject: nothing to wait for).
  void refuseOffer(int peer, uint64_t msg, size_t announced);
  void wrote(Run& r, Op& op);
  void finished(Run& r, Op& op);
  bool postWrite(Run& r, Op& op, void* desc);
  Rma& rmaOf(Run& r, const Xfer& x);
  void readCompletions(Run& r, bool* progress);
  [[noreturn]] void failCompletion(Run& r);
  // Every 100 ms: a peer on this host that an unfinished operation waits on
  // and whose process is gone fails the run (after one more read of the queue).
  void checkPeers(Run& r, const Xfer& pending, std::chrono::steady_clock::time_point* lastAliveCheck,
                  ProgressWatch& watch);
  const Op* awaitsExitedPeer(const Run& r) const;
  void cancelAll(Run& r);
  // Nothing moved: sleep on the queue's descriptor (at most 100 ms) once
  // run() has spun spinUs_, where nothing waits for room; else yield.
  void idle(const Run& r, double sinceProgressUs);
  // Registration (FI_MR_LOCAL): the descriptor of [p, p + n), registered
  // for this run where no registration of the run covers it yet.
  void* descFor(Run& r, const void* p, size_t n);
  fid_mr* registerMemory(const void* p, size_t n, uint64_t access);
  uint64_t localAccess() const;  // what run()'s own registrations allow
  // Encrypted links (ofi_sealed.cc).
  void setUpSealing(const std::vector<std::array<uint8_t, 16>>& nonces);
  bool sealed(int peer) const { return peer >= 0 && static_cast<size_t>(peer) < sealTo_.size() && sealTo_[peer]; }
  size_t wireBytes(int peer, size_t plain) const;
  void openPart(Op& op);

  const ofi::OfiApi& api_;
  TransportContext ctx_;
  std::string provider_;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_av* av_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_ep* ep_ = nullptr;
  int waitFd_ = -1;    // the completion queue's wait descriptor (FI_WAIT_FD), or -1: poll only
  double spinUs_ = 0;  // HETCCL_SPIN_US: how long run() spins before it sleeps on waitFd_
  bool mrLocal_ = false, mrEndpoint_ = false, mrProvKey_ = false, mrVirtAddr_ = false;
  bool hasRma_ = false;                      // this rank's provider offers FI_RMA
  uint64_t rmaMin_ = 0;                      // HETCCL_OFI_RMA_MIN where every rank has FI_RMA; 0: tagged parts only
  std::unique_ptr<ofi::MrCache> remoteMrs_;  // receive buffers registered for remote writes
  uint64_t rmaWritten_ = 0, rmaReceived_ = 0, rmaParts_ = 0;  // messages: written, received by write, asked as parts
  uint64_t nextKey_ = 1;                                      // requested keys where the provider does not choose them
  size_t partBytes_ = size_t{4} << 20;
  std::vector<fi_addr_t> addr_;              // by rank
  std::vector<uint64_t> sendSeq_, recvSeq_;  // message numbers by peer
  std::vector<int> localPid_;                // by rank: pid of a peer on this host, else 0
  std::vector<uint8_t> staging_;             // receive slots: receive-reduce parts, encrypted parts
  std::vector<uint8_t> sendStaging_;         // send slots: encrypted parts (empty where no link is)
  fid_mr* stagingMr_ = nullptr;
  fid_mr* sendStagingMr_ = nullptr;
  std::vector<std::unique_ptr<secure::MessageCipher>> sealTo_, openFrom_;  // by rank; null: plaintext
  int threads_ = 1;                                                        // sealing and opening (HETCCL_HOST_THREADS)
  std::string failed_;  // why an earlier run() failed: the endpoint is in an unknown state
};

}  // namespace hetccl
