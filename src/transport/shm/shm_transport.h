// Shared-memory transport for ranks on one host. Each rank owns an inbox
// segment holding one single-producer/single-consumer ring of fixed slots per
// sending peer, plus a doorbell word the rank sleeps on (futex) when it has
// nothing to do. Senders copy into a slot and ring the receiver's doorbell;
// receivers copy (or reduce) out of the slot and ring the sender's doorbell.
// Messages larger than a slot are read by the receiver straight from the
// sender's memory (process_vm_readv: one copy instead of two) when every
// rank may do so; HETCCL_SHM_CMA=0 turns that off. Several threads share
// such a read (HETCCL_HOST_THREADS).
// A peer that dies is noticed through its pid within one wait slice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace hetccl {

struct ShmInbox;  // layout in shm_transport.cc
struct ShmRing;

class ShmTransport : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx);
  ~ShmTransport() override;
  const char* name() const override { return "shm"; }
  void run(std::span<Xfer> xfers) override;
  void drain() override;
  void forgetLazy() override { lazyAcks_.clear(); }
  // Writes `why` into this rank's inbox and marks every peer's inbox as
  // failed by this rank; their waits check that mark.
  void poison(const std::string& why) override;
  // Test hook (fuzzing the receive side's slot checks): drops what is unread
  // in this rank's ring from `peer`, then writes raw slots into it as that
  // peer would (each: a 64-byte slot header, then the slot's data; cut to
  // one slot) and publishes them. Returns how many fit in the ring.
  size_t injectSlotsForTest(int peer, const std::vector<std::vector<uint8_t>>& slots);
  size_t slotBytes() const { return slotBytes_; }

 private:
  ShmRing* ringTo(int peer);    // in peer's inbox, written by me
  ShmRing* ringFrom(int peer);  // in my inbox, written by peer
  void ring(int rank);          // wake `rank` if it sleeps
  void checkPeersAlive(const Xfer& waitingFor) const;
  // Throws when a peer marked this rank's inbox as failed (poison()).
  void checkNotPoisoned(const Xfer* during) const;
  // run() and drain(): moves `xfers` and waits for the acks in `lazy`.
  void progress(std::span<Xfer> xfers, std::vector<std::pair<Xfer, uint64_t>>* lazy);
  void probeCma();
  // Receives (or receive-reduces) a whole message from the sender's memory.
  void cmaRead(const Xfer& x, uint64_t addr);
  void cmaReadRange(const Xfer& x, uint64_t addr, size_t lo, size_t hi, uint8_t* staging);

  TransportContext ctx_;
  size_t slotBytes_ = 0;
  uint32_t slots_ = 0;
  size_t ringBytes_ = 0;
  size_t segBytes_ = 0;
  std::vector<ShmInbox*> inbox_;  // by rank; mapped for me and my peers
  std::vector<int> pids_;         // by rank
  int spinUs_ = 0;
  bool oversubscribed_ = false;  // more ranks than cores: spin by yielding
  bool cma_ = false;             // single-copy reads of large messages
  // Lazy single-copy sends run() returned before the receiver read them:
  // each is done once the receiver consumed its slot (ring index).
  std::vector<std::pair<Xfer, uint64_t>> lazyAcks_;
  int threads_ = 1;                  // that read them (HETCCL_HOST_THREADS)
  std::vector<uint8_t> cmaStaging_;  // receive-reduce staging, one block per thread
};

}  // namespace hetccl
