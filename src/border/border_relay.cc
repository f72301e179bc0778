#include "border/border_relay.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "observe/call_metrics.h"
#include "border/device_border.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "device/device.h"
#include "device/host_flag.h"

namespace hetccl {
namespace {

constexpr int kSlots = DeviceBorder::kSlots;

}  // namespace

BorderRelay::BorderRelay(DeviceBorder& b, std::vector<int> remote, double timeoutS)
    : b_(b), remote_(std::move(remote)), timeoutS_(timeoutS) {}

std::unique_ptr<BorderRelay> BorderRelay::create(DeviceBorder& b, const std::string& transport, TransportContext ctx,
                                                 std::vector<int> remote, CallMetrics* metrics) {
  std::unique_ptr<BorderRelay> r(new BorderRelay(b, std::move(remote), ctx.timeoutS));
  r->metrics_ = metrics;
  ctx.peers.clear();
  for (int q : r->remote_) ctx.peers.push_back(b.peerRank(q));
  ctx.abort = &r->stop_;
  for (auto& t : r->transports_) t = createTransport(transport, ctx);
  if (!r->remote_.empty()) {
    for (int w = 0; w < kWorks; ++w) r->threads_[w] = std::thread([p = r.get(), w] { p->loop(static_cast<Work>(w)); });
    std::string who;
    for (int q : r->remote_) who += (who.empty() ? "" : ", ") + std::to_string(b.peerRank(q));
    LOG_INFO(kInit, "device border: border peers on other hosts (ranks %s) through mirrors relayed over %s",
             who.c_str(), transport.c_str());
  }
  return r;
}

BorderRelay::~BorderRelay() { stop(); }

void BorderRelay::stop() {
  {
    // The last calls' acks, and exchanges a peer waits for where this rank
    // read nothing, may still be on their way after the calls ended on the
    // device: a while for every thread to be done with what was committed,
    // then stop.
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::seconds(5), [&] {
      return stop_.load() || std::all_of(served_, served_ + kWorks, [&](uint64_t s) { return s >= committed_; });
    });
    stop_.store(true);
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void BorderRelay::announceRead(int q, uint64_t seq, bool results, size_t off, size_t len) {
  const auto it = std::find(remote_.begin(), remote_.end(), q);
  if (it == remote_.end()) return;
  std::lock_guard<std::mutex> g(mu_);
  std::vector<Request>& reqs = wants_[seq];
  if (reqs.empty()) reqs.resize(remote_.size());
  addRange(reqs[it - remote_.begin()], results, off, len);
}

void BorderRelay::addRange(Request& r, bool results, size_t off, size_t len) {
  const int w = results ? 1 : 0;
  r.flags |= 1u << w;
  if (len == 0) return;
  for (uint32_t i = 0; i < r.count[w]; ++i) {  // the same range again, or one that goes on from it
    Range& have = r.ranges[w][i];
    if (off >= have.off && off + len <= have.off + have.len) return;
    if (off == have.off + have.len) {
      have.len += len;
      return;
    }
  }
  if (r.count[w] == kMaxRanges)
    throwError(hetcclInternalError, "device border relay: more than " + std::to_string(kMaxRanges) +
                                        " ranges of one peer's segment read in one slot use");
  r.ranges[w][r.count[w]++] = Range{off, len};
}

void BorderRelay::commit(uint64_t seq) {
  if (remote_.empty()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (seq <= committed_) return;
    committed_ = seq;
  }
  cv_.notify_all();
}

void BorderRelay::halt(const std::string& why) {
  if (stop_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> g(mu_);  // a thread between its check and its wait sees it
  }
  cv_.notify_all();
  for (auto& t : transports_) t->poison(why);
}

std::string BorderRelay::error() const {
  std::lock_guard<std::mutex> g(mu_);
  return error_;
}

void BorderRelay::failed(const std::string& why) {
  if (stop_.load()) return;  // halted: whoever halted it released the streams
  {
    std::lock_guard<std::mutex> g(mu_);
    if (error_.empty()) error_ = why;
  }
  LOG_WARN(kColl, "device border relay failed: %s", why.c_str());
  b_.releaseAll();  // halts this relay too: the other threads and the remote peers stop
}

void BorderRelay::loop(Work w) {
  uint64_t next = 1;  // DeviceBorder::nextSeq counts from 1
  try {
    for (;;) {
      Swapped results;
      {
        std::unique_lock<std::mutex> lk(mu_);
        // Results wait for the parts thread's swap of the requests.
        auto ready = [&] { return stop_.load() || (w == kResults ? swappedUpTo_ : committed_) >= next; };
        while (!cv_.wait_for(lk, std::chrono::milliseconds(250), ready))
          if (w == kParts) checkEnqueuing();
        if (stop_.load()) return;
        if (w == kResults) {
          auto it = swapped_.find(next);
          if (it != swapped_.end()) {
            results = std::move(it->second);
            swapped_.erase(it);
          }
        }
      }
      if (w == kAcks)
        serveAcks(next);
      else if (w == kParts)
        serveParts(next);
      else if (!results.mine.empty())
        move(next, 1, results.mine, results.theirs);
      {
        std::lock_guard<std::mutex> g(mu_);
        served_[w] = next;
      }
      cv_.notify_all();
      ++next;
    }
  } catch (const std::exception& e) {
    failed(e.what());
  }
}

MsgTag BorderRelay::tag(uint64_t seq, Msg m) const {
  MsgTag t;
  t.seq = seq;
  t.coll = kDeviceBorderRelay;
  t.op = m;
  return t;
}

void BorderRelay::checkEnqueuing() const {
  const double us = b_.enqueueStalledUs();
  if (us <= timeoutS_ * 1e6) return;
  throwError(hetcclRemoteError,
             "device border relay: this rank's thread has been enqueuing a call for " +
                 std::to_string(static_cast<int>(us / 1e6)) +
                 " s without announcing its next slot use (HETCCL_TIMEOUT_S): a call it made waits, for the "
                 "device (whose streams wait on this relay: an implicit synchronisation, a kernel loaded lazily) "
                 "or for a group peer that does not come");
}

void BorderRelay::waitStored(volatile uint64_t* f, uint64_t seq, const char* what) {
  const double deadline = clockUs() + timeoutS_ * 1e6;
  for (int spin = 0;; ++spin) {
    const uint64_t v = flagLoad(f);
    if (v == kFlagReleased)
      throwError(hetcclRemoteError, std::string("device border relay: ") + what + " was released (failed or aborted)");
    if (v >= seq) return;
    if (stop_.load()) throwError(hetcclRemoteError, "device border relay: stopped");
    if (spin < 256) continue;
    if (clockUs() > deadline)
      throwError(hetcclRemoteError, std::string("device border relay: ") + what + " for slot use " +
                                        std::to_string(seq) + " was not stored within " +
                                        std::to_string(static_cast<int>(timeoutS_)) + " s (HETCCL_TIMEOUT_S)");
    if (spin < 4096) {
      sched_yield();
    } else {
      const timespec pause{0, 20000};
      nanosleep(&pause, nullptr);
    }
  }
}

std::string BorderRelay::requestError(const Request& r, uint64_t seq, uint64_t lo, uint64_t hi) {
  if (r.seq != seq) return "sent the request of slot use " + std::to_string(r.seq);
  for (int w = 0; w < 2; ++w) {
    if (r.count[w] > kMaxRanges) return "asked for " + std::to_string(r.count[w]) + " ranges";
    if (r.count[w] && !(r.flags & (1u << w))) return "asked for data without its flag";
    for (uint32_t i = 0; i < r.count[w]; ++i) {
      const Range& x = r.ranges[w][i];
      if (x.off < lo || x.off > hi || x.len > hi - x.off)
        return "asked for bytes " + std::to_string(x.off) + " + " + std::to_string(x.len) +
               ", outside this rank's border data (" + std::to_string(lo) + " to " + std::to_string(hi) + ")";
    }
  }
  return "";
}

void BorderRelay::check(const Request& r, int q, uint64_t seq) const {
  const std::string why = requestError(r, seq, b_.dataOffset(), b_.segmentBytes());
  if (!why.empty())
    throwError(hetcclRemoteError, "device border relay: rank " + std::to_string(b_.peerRank(q)) + " " + why +
                                      " in slot use " + std::to_string(seq));
}

void BorderRelay::serveParts(uint64_t seq) {
  const size_t n = remote_.size();
  std::vector<Request> mine(n), theirs(n);
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = wants_.find(seq);
    if (it != wants_.end()) {
      mine = std::move(it->second);
      wants_.erase(it);
    }
  }
  std::vector<Xfer> x;
  for (size_t i = 0; i < n; ++i) {
    const int peer = b_.peerRank(remote_[i]);
    mine[i].seq = seq;
    x.push_back(Xfer::send(peer, &mine[i], sizeof(Request), tag(seq, kRequest)));
    x.push_back(Xfer::recv(peer, &theirs[i], sizeof(Request), tag(seq, kRequest)));
  }
  transports_[kParts]->run(x);
  bool results = false;
  for (size_t i = 0; i < n; ++i) {
    check(theirs[i], remote_[i], seq);
    results = results || ((mine[i].flags | theirs[i].flags) & 2u);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    if (results) swapped_[seq] = Swapped{mine, theirs};
    swappedUpTo_ = seq;
  }
  cv_.notify_all();
  move(seq, 0, mine, theirs);
}

void BorderRelay::move(uint64_t seq, int w, const std::vector<Request>& mine, const std::vector<Request>& theirs) {
  const int slot = static_cast<int>(seq % kSlots), me = b_.me();
  const size_t n = remote_.size();
  const uint32_t bit = 1u << w;
  bool asked = false, asking = false;
  for (size_t i = 0; i < n; ++i) {
    asked = asked || (theirs[i].flags & bit);
    asking = asking || (mine[i].flags & bit);
  }
  if (!asked && !asking) return;
  if (asked)
    waitStored(w ? b_.done(me, slot) : b_.ready(me, slot), seq, w ? "this rank's done flag" : "this rank's ready flag");
  const Msg m = w ? kDone : kReady;
  std::vector<uint64_t> got(n, 0);
  uint64_t sent = 0;
  std::vector<Xfer> x;
  for (size_t i = 0; i < n; ++i) {
    const int q = remote_[i], peer = b_.peerRank(q);
    if (theirs[i].flags & bit) {
      for (uint32_t j = 0; j < theirs[i].count[w]; ++j) {
        const Range& r = theirs[i].ranges[w][j];
        x.push_back(Xfer::send(peer, b_.segment(me) + r.off, r.len, tag(seq, m)));
        sent += r.len;
      }
      x.push_back(Xfer::send(peer, &seq, sizeof(seq), tag(seq, m)));
    }
    if (mine[i].flags & bit) {
      for (uint32_t j = 0; j < mine[i].count[w]; ++j) {
        const Range& r = mine[i].ranges[w][j];
        x.push_back(Xfer::recv(peer, b_.segment(q) + r.off, r.len, tag(seq, m)));
      }
      x.push_back(Xfer::recv(peer, &got[i], sizeof(uint64_t), tag(seq, m)));
    }
  }
  transports_[w ? kResults : kParts]->run(x);
  if (metrics_ && sent) metrics_->linkBytes(CallMetrics::kBorderRemote, sent);
  for (size_t i = 0; i < n; ++i) {
    if (!(mine[i].flags & bit)) continue;
    const int q = remote_[i];
    if (got[i] != seq)
      throwError(hetcclRemoteError, "device border relay: rank " + std::to_string(b_.peerRank(q)) +
                                        " sent the data of slot use " + std::to_string(got[i]) + " for " +
                                        std::to_string(seq));
    flagRaise(w ? b_.done(q, slot) : b_.ready(q, slot), seq);
  }
}

void BorderRelay::serveAcks(uint64_t seq) {
  const int slot = static_cast<int>(seq % kSlots), me = b_.me();
  const size_t n = remote_.size();
  for (int q : remote_) waitStored(b_.ack(q, me, slot), seq, "this rank's acknowledgement");
  std::vector<uint64_t> got(n, 0);
  std::vector<Xfer> x;
  for (size_t i = 0; i < n; ++i) {
    const int peer = b_.peerRank(remote_[i]);
    x.push_back(Xfer::send(peer, &seq, sizeof(seq), tag(seq, kAck)));
    x.push_back(Xfer::recv(peer, &got[i], sizeof(uint64_t), tag(seq, kAck)));
  }
  transports_[kAcks]->run(x);
  for (size_t i = 0; i < n; ++i) {
    const int q = remote_[i];
    if (got[i] != seq)
      throwError(hetcclRemoteError, "device border relay: rank " + std::to_string(b_.peerRank(q)) +
                                        " acknowledged slot use " + std::to_string(got[i]) + " for " +
                                        std::to_string(seq));
    flagRaise(b_.ack(me, q, slot), seq);
  }
}

}  // namespace hetccl
