#include "bootstrap/bootstrap.h"

#include <poll.h>

#include <algorithm>
#include <climits>
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

// Every block on the ring goes behind this frame, so that a rank whose init
// or split failed can say so, and why, in place of its next block: the
// others fail at once naming it, instead of naming whichever neighbour
// closed its socket first.
constexpr uint32_t kFrameMagic = 0x48524e47;  // "HRNG"
constexpr uint32_t kFrameBlock = 0, kFrameFailure = 1;
constexpr uint32_t kMaxFailureText = 4096;
}  // namespace

struct Bootstrap::Frame {
  uint32_t magic;
  uint32_t kind;
  int32_t origin;  // the failed rank (kFrameFailure)
  uint32_t bytes;  // of the block or the failure text that follows
};

Deadline Bootstrap::deadline() const { return Deadline::in(timeoutS_, abort_); }

Bootstrap::Bootstrap(const IdContents& id, int rank, int nranks, const std::vector<uint8_t>& record, double timeoutS,
                     const std::atomic<bool>* abort, double joinS)
    : id_(id), rank_(rank), nranks_(nranks), timeoutS_(timeoutS), abort_(abort) {
  Socket listener = Socket::listen(SockAddr::local());
  RingRecord rr{};
  SockAddr mine = listener.boundAddr();
  rr.addr = mine.ss;
  rr.len = mine.len;
  std::vector<uint8_t> full(sizeof(rr) + record.size());
  memcpy(full.data(), &rr, sizeof(rr));
  memcpy(full.data() + sizeof(rr), record.data(), record.size());

  auto table = rendezvous(id, rank, nranks, full, joinS > 0 ? Deadline::in(joinS, abort_) : deadline());
  std::vector<SockAddr> ring(nranks);
  records_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    memcpy(&rr, table[r].data(), sizeof(rr));
    if (rr.len > sizeof(sockaddr_storage))
      throwError(hetcclRemoteError, "bootstrap: bad ring address of rank " + std::to_string(r));
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
          [&](const PeerHello& h, Socket& s, const SessionNonces&) {
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
  if (failed_) throwError(hetcclRemoteError, "bootstrap: this rank's ring already failed");
  // Send to the next rank while receiving from the previous one, so blocks
  // larger than the socket buffers cannot deadlock the ring.
  Deadline dl = deadline();
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const std::string toWhat = "bootstrap allgather to rank " + std::to_string((rank_ + 1) % nranks_);
  const std::string fromWhat = "bootstrap allgather from rank " + std::to_string(prev);
  if (bytes > UINT32_MAX) throwError(hetcclInvalidArgument, toWhat + ": block too large");
  Frame mine{kFrameMagic, kFrameBlock, rank_, static_cast<uint32_t>(bytes)};
  std::vector<uint8_t> out(sizeof(Frame) + bytes);
  memcpy(out.data(), &mine, sizeof(Frame));
  if (bytes) memcpy(out.data() + sizeof(Frame), sendBuf, bytes);
  Frame theirs{};
  auto* in = static_cast<uint8_t*>(recvBuf);
  const size_t total = out.size();
  size_t got = 0;  // of the frame, then of the block
  sent_ = 0;
  sendTotal_ = total;
  while (sent_ < total || got < total) {
    size_t moved = 0;
    if (sent_ < total) {
      size_t n = next_.sendSome(out.data() + sent_, total - sent_, toWhat);
      sent_ += n;
      moved += n;
    }
    if (got < total) {
      size_t n = got < sizeof(Frame)
                     ? prev_.recvSome(reinterpret_cast<uint8_t*>(&theirs) + got, sizeof(Frame) - got, fromWhat)
                     : prev_.recvSome(in + (got - sizeof(Frame)), total - got, fromWhat);
      got += n;
      moved += n;
      if (n && got == sizeof(Frame)) {
        if (theirs.magic != kFrameMagic) throwError(hetcclRemoteError, fromWhat + ": not a bootstrap frame");
        if (theirs.kind == kFrameFailure) relayFailure(theirs, fromWhat);
        if (theirs.bytes != bytes)
          throwError(hetcclInvalidUsage, fromWhat + ": a block of " + std::to_string(theirs.bytes) +
                                             " bytes where this rank expected " + std::to_string(bytes) +
                                             " (the ranks are not at the same step of init or split)");
      }
    }
    if (moved) {
      dl = deadline();
      continue;
    }
    if (dl.aborted()) throwError(hetcclRemoteError, fromWhat + ": communicator aborted");
    if (dl.passed()) throwError(hetcclRemoteError, (sent_ < total ? toWhat : fromWhat) + ": timed out");
    pollfd pf[2] = {{next_.fd(), static_cast<short>(sent_ < total ? POLLOUT : 0), 0},
                    {prev_.fd(), static_cast<short>(got < total ? POLLIN : 0), 0}};
    ::poll(pf, 2, dl.sliceMs());
  }
}

void Bootstrap::relayFailure(const Frame& f, const std::string& fromWhat) {
  std::string text(std::min(f.bytes, kMaxFailureText), '\0');
  try {
    prev_.recvAll(text.data(), text.size(), Deadline::in(2.0), fromWhat);
  } catch (const Error&) {
    text = "(its reason was lost)";
  }
  const std::string why = "rank " + std::to_string(f.origin) + " failed: " + text;
  announceFailure(f.origin, text);
  throwError(hetcclRemoteError, why);
}

void Bootstrap::announceFailure(const std::string& text) { announceFailure(rank_, text); }

void Bootstrap::announceFailure(int origin, const std::string& text) {
  if (failed_ || nranks_ == 1 || !next_.valid()) return;
  failed_ = true;
  // The next rank reads the failure where it expects our next block: the
  // block in flight (if any) is finished first so the frames stay aligned.
  // Best effort, briefly: the next rank may be gone too.
  try {
    Deadline dl = Deadline::in(2.0);
    const std::string what = "bootstrap failure notice to rank " + std::to_string((rank_ + 1) % nranks_);
    if (sent_ > 0 && sent_ < sendTotal_) return;  // mid-block: the socket's close says it
    const std::string t = text.substr(0, kMaxFailureText);
    Frame f{kFrameMagic, kFrameFailure, origin, static_cast<uint32_t>(t.size())};
    next_.sendAll(&f, sizeof(f), dl, what);
    next_.sendAll(t.data(), t.size(), dl, what);
  } catch (const Error&) {
  }
}

void Bootstrap::barrier() {
  std::vector<uint8_t> b(nranks_);
  allGather(b.data(), 1);
}

}  // namespace hetccl
