#include "bootstrap/bootstrap.h"

#include <poll.h>

#include <cstring>
#include <exception>
#include <thread>

#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {
// What the bootstrap adds in front of the caller's record: its ring address.
struct RingRecord {
  sockaddr_storage addr;
  uint32_t len;
  uint32_t reserved;
};
}  // namespace

Deadline Bootstrap::deadline() const { return Deadline::in(timeoutS_, abort_); }

Bootstrap::Bootstrap(const IdContents& id, int rank, int nranks, const std::vector<uint8_t>& record,
                     double timeoutS, const std::atomic<bool>* abort)
    : id_(id), rank_(rank), nranks_(nranks), timeoutS_(timeoutS), abort_(abort) {
  Socket listener = Socket::listen(SockAddr::local());
  RingRecord rr{};
  SockAddr mine = listener.boundAddr();
  rr.addr = mine.ss;
  rr.len = mine.len;
  std::vector<uint8_t> full(sizeof(rr) + record.size());
  memcpy(full.data(), &rr, sizeof(rr));
  memcpy(full.data() + sizeof(rr), record.data(), record.size());

  auto table = rendezvous(id, rank, nranks, full, deadline());
  std::vector<SockAddr> ring(nranks);
  records_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    memcpy(&rr, table[r].data(), sizeof(rr));
    if (rr.len > sizeof(sockaddr_storage)) throwError(hetcclRemoteError, "bootstrap: bad ring address of rank " + std::to_string(r));
    ring[r].ss = rr.addr;
    ring[r].len = rr.len;
    records_[r].assign(table[r].begin() + sizeof(rr), table[r].end());
  }
  addrs_ = ring;
  if (nranks == 1) return;

  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  // Accept the previous rank on a helper thread while connecting to the
  // next: every rank is client and server at once.
  std::exception_ptr acceptError;
  std::atomic<bool> stop{false};  // set when connecting failed: no point waiting
  std::thread acceptor([&] {
    try {
      acceptPeers(
          listener, id.secret, id.jobId, Service::kRing, deadline(), &stop,
          [&](const PeerHello& h, Socket& s) {
            if (h.rank != prev || prev_.valid()) return false;
            prev_ = std::move(s);
            return true;
          },
          [&] { return prev_.valid(); },
          "bootstrap: rank " + std::to_string(prev) + " did not connect to the ring in time");
    } catch (...) {
      acceptError = std::current_exception();
    }
  });
  try {
    PeerHello me{id.jobId, rank, nranks, static_cast<uint32_t>(Service::kRing), 0};
    std::string nextWhat = "bootstrap ring peer rank " + std::to_string(next);
    next_ = Socket::connect(ring[next], deadline(), nextWhat);
    clientHandshake(next_, id.secret, me, deadline(), nextWhat);
  } catch (...) {
    stop.store(true);
    acceptor.join();
    throw;
  }
  acceptor.join();
  if (acceptError) std::rethrow_exception(acceptError);
  LOG_INFO(kBootstrap, "rank %d of %d: bootstrap ring connected", rank, nranks);
}

Socket Bootstrap::relisten() const { return Socket::listen(addrs_.at(rank_)); }

void Bootstrap::allGather(void* data, size_t bytes) {
  if (nranks_ == 1 || bytes == 0) return;
  auto* base = static_cast<uint8_t*>(data);
  // Step s: pass on the block that arrived in step s-1 (first: my own).
  for (int s = 0; s < nranks_ - 1; ++s) {
    int sendBlock = (rank_ - s + nranks_) % nranks_;
    int recvBlock = (rank_ - s - 1 + nranks_) % nranks_;
    shift(base + static_cast<size_t>(sendBlock) * bytes, base + static_cast<size_t>(recvBlock) * bytes, bytes);
  }
}

void Bootstrap::shift(const void* sendBuf, void* recvBuf, size_t bytes) {
  // Send to the next rank while receiving from the previous one, so blocks
  // larger than the socket buffers cannot deadlock the ring.
  Deadline dl = deadline();
  const std::string toWhat = "bootstrap allgather to rank " + std::to_string((rank_ + 1) % nranks_);
  const std::string fromWhat = "bootstrap allgather from rank " + std::to_string((rank_ + nranks_ - 1) % nranks_);
  auto* out = static_cast<const uint8_t*>(sendBuf);
  auto* in = static_cast<uint8_t*>(recvBuf);
  size_t sent = 0, got = 0;
  while (sent < bytes || got < bytes) {
    size_t moved = 0;
    if (sent < bytes) moved += next_.sendSome(out + sent, bytes - sent, toWhat), sent += moved;
    if (got < bytes) {
      size_t r = prev_.recvSome(in + got, bytes - got, fromWhat);
      got += r;
      moved += r;
    }
    if (moved) {
      dl = deadline();
      continue;
    }
    if (dl.aborted()) throwError(hetcclRemoteError, fromWhat + ": communicator aborted");
    if (dl.passed()) throwError(hetcclRemoteError, (sent < bytes ? toWhat : fromWhat) + ": timed out");
    pollfd pf[2] = {{next_.fd(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                    {prev_.fd(), static_cast<short>(got < bytes ? POLLIN : 0), 0}};
    ::poll(pf, 2, dl.sliceMs());
  }
}

void Bootstrap::barrier() {
  std::vector<uint8_t> b(nranks_);
  allGather(b.data(), 1);
}

}  // namespace hetccl
