// Bootstrap network of one communicator: the rendezvous through the root,
// then a ring of authenticated sockets for small control collectives
// (allgather, barrier) used at init, split and by backends to share ids.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace hetccl {

class Bootstrap {
 public:
  // Joins the rendezvous of `id` with this rank's record; returns when every
  // rank's record is known and the ring is connected. joinS (0: timeoutS)
  // bounds the wait for the rendezvous; timeoutS every other wait.
  Bootstrap(const IdContents& id, int rank, int nranks, const std::vector<uint8_t>& record, double timeoutS,
            const std::atomic<bool>* abort, double joinS = 0);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const IdContents& id() const { return id_; }
  // Every rank's record, in rank order, as given to the constructor.
  const std::vector<std::vector<uint8_t>>& records() const { return records_; }

  // data holds nranks blocks of `bytes`; this rank's block is at rank*bytes.
  // Throws hetcclRemoteError "rank R failed: <why>" when a rank announced
  // its failure instead of sending its block.
  void allGather(void* data, size_t bytes);
  void barrier();
  // This rank failed (init, split): tells the next rank in place of its next
  // block, which tells the next, so every rank's pending or next allgather
  // fails at once naming this rank and the reason. Best effort, at most once.
  void announceFailure(const std::string& text);

  // Where rank r's bootstrap listener was. It is closed once the ring is up
  // (an open listener nobody accepts on would hold strangers' connections),
  // but every rank knows the address, so a rank can listen there again to
  // serve a later rendezvous of a subset of the ranks (shrink).
  const SockAddr& listenerAddr(int r) const { return addrs_.at(r); }
  // Listens at this rank's address again (throws SystemError naming the
  // address when it has been taken meanwhile).
  Socket relisten() const;

 private:
  Deadline deadline() const;
  struct Frame;
  void shift(const void* sendBuf, void* recvBuf, size_t bytes);
  [[noreturn]] void relayFailure(const Frame& f, const std::string& fromWhat);
  void announceFailure(int origin, const std::string& text);

  IdContents id_;
  int rank_;
  int nranks_;
  double timeoutS_;
  const std::atomic<bool>* abort_;
  std::vector<std::vector<uint8_t>> records_;
  std::vector<SockAddr> addrs_;
  Socket next_, prev_;
  size_t sent_ = 0, sendTotal_ = 0;  // of the block in flight to next_
  bool failed_ = false;
};

}  // namespace hetccl
