#include "border/pair_relay.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>

#include "observe/call_metrics.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "device/device.h"
#include "device/host_flag.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {
namespace {

constexpr int kSlots = PairChannel::kSlots;
constexpr size_t kFlagStride = 64;   // one cache line per flag
constexpr size_t kFlagBytes = 4096;  // out ready, out ack, in ready, in ack: kSlots each
static_assert(4 * kSlots * kFlagStride <= kFlagBytes, "the flags outgrew their page");
enum Msg : uint8_t { kStatus = 0, kParts = 1 };

MsgTag tag(uint64_t round, Msg m) {
  MsgTag t;
  t.seq = round;
  t.coll = kPairRelay;
  t.op = m;
  return t;
}

}  // namespace

struct PairRelay::Link {
  int peer = -1;
  std::atomic<bool> made{false};  // ch and mem are set (the enqueuing thread, once)
  PairChannel ch;
  uint8_t* mem = nullptr;
  size_t bytes = 0;
  // Under mu_: announced parts not yet moved, each {length, message length}.
  std::deque<std::pair<size_t, size_t>> outs, ins;
  // The relay thread: parts moved each way; parts this rank's stream copied
  // out of the inbox (contiguous).
  uint64_t sent = 0, received = 0, acked = 0;
  bool gone = false;  // the peer said goodbye (set by the relay thread, under mu_)
};

PairRelay::PairRelay(DeviceRuntime& d, std::vector<int> peers, size_t partBytes, double timeoutS)
    : d_(d), peers_(std::move(peers)), partBytes_(partBytes), timeoutS_(timeoutS) {
  for (int p : peers_) {
    links_.push_back(std::make_unique<Link>());
    links_.back()->peer = p;
  }
}

std::unique_ptr<PairRelay> PairRelay::create(DeviceRuntime& d, const std::string& transport, TransportContext ctx,
                                             std::vector<int> peers, size_t partBytes, CallMetrics* metrics,
                                             Failed failed) {
  std::unique_ptr<PairRelay> r(new PairRelay(d, std::move(peers), partBytes, ctx.timeoutS));
  r->metrics_ = metrics;
  r->onFailure_ = std::move(failed);
  ctx.peers = r->peers_;
  ctx.abort = &r->stop_;
  r->transport_ = createTransport(transport, ctx);
  if (!r->peers_.empty()) {
    r->thread_ = std::thread([p = r.get()] { p->loop(); });
    std::string who;
    for (int p : r->peers_) who += (who.empty() ? "" : ", ") + std::to_string(p);
    LOG_INFO(kInit, "send/recv with GPU ranks of other groups on other hosts (ranks %s) relayed over %s", who.c_str(),
             transport.c_str());
  }
  return r;
}

PairRelay::~PairRelay() {
  stop();
  transport_.reset();  // nothing of it lands in a channel once unmapped
  for (auto& l : links_)
    if (l->made.load()) {
      d_.unregisterHost(l->mem);
      munmap(l->mem, l->bytes);
    }
}

PairChannel* PairRelay::channel(int peer) {
  const auto it = std::lower_bound(peers_.begin(), peers_.end(), peer);
  if (it == peers_.end() || *it != peer) return nullptr;
  Link& l = *links_[it - peers_.begin()];
  {
    std::lock_guard<std::mutex> g(mu_);
    usable(l);
  }
  if (l.made.load(std::memory_order_acquire)) return &l.ch;
  l.bytes = kFlagBytes + 2 * static_cast<size_t>(kSlots) * partBytes_;
  uint8_t* m = mapShmSegment(-1, l.bytes, "of a send/recv relay channel");
  try {
    d_.registerHost(m, l.bytes);
  } catch (...) {
    munmap(m, l.bytes);
    throw;
  }
  l.mem = m;
  l.ch.peer = peer;
  l.ch.relayLink = static_cast<int>(it - peers_.begin());
  l.ch.partBytes = partBytes_;
  auto flag = [&](int which, int slot) {
    return reinterpret_cast<volatile uint64_t*>(m + (static_cast<size_t>(which) * kSlots + slot) * kFlagStride);
  };
  for (int s = 0; s < kSlots; ++s) {
    l.ch.outReady[s] = flag(0, s);
    l.ch.outAck[s] = flag(1, s);
    l.ch.inReady[s] = flag(2, s);
    l.ch.inAck[s] = flag(3, s);
    l.ch.outData[s] = m + kFlagBytes + static_cast<size_t>(s) * partBytes_;
    l.ch.inData[s] = m + kFlagBytes + static_cast<size_t>(kSlots + s) * partBytes_;
  }
  {
    // Published under mu_: a release (releaseFlags, under mu_ too) either
    // comes after and finds it, or came before and this throws.
    std::lock_guard<std::mutex> g(mu_);
    l.made.store(true, std::memory_order_release);
    usable(l);
  }
  LOG_INFO(kColl, "send/recv relay: channel with rank %d made (%zu bytes pinned)", peer, l.bytes);
  return &l.ch;
}

void PairRelay::usable(const Link& l) const {
  const std::string who = "send/recv with rank " + std::to_string(l.peer) + " (another host): ";
  if (!error_.empty()) throwError(hetcclRemoteError, who + "the relay across hosts ended: " + error_);
  if (stop_.load()) throwError(hetcclRemoteError, who + "the relay across hosts was stopped (abort or failure)");
  if (l.gone) throwError(hetcclInvalidUsage, who + "that rank destroyed its communicator (its relay said goodbye)");
}

bool PairRelay::owns(const PairChannel& ch) const {
  return ch.relayLink >= 0 && ch.relayLink < static_cast<int>(links_.size()) && &links_[ch.relayLink]->ch == &ch;
}

void PairRelay::announce(const PairChannel& ch, bool send, size_t len, size_t msg) {
  if (!owns(ch)) return;
  Link& l = *links_[ch.relayLink];
  {
    std::lock_guard<std::mutex> g(mu_);
    try {
      // The relay ended (or the peer left) since the channel was handed
      // out: nothing will move this part, so what this call enqueued on
      // the channel goes on at once, and the call fails.
      usable(l);
    } catch (...) {
      releaseChannel(l);
      throw;
    }
    (send ? l.outs : l.ins).emplace_back(len, msg);
    ++announced_;
  }
  cv_.notify_all();
}

void PairRelay::releaseChannel(Link& l) {
  if (!l.made.load(std::memory_order_acquire)) return;
  for (int s = 0; s < kSlots; ++s) {
    flagRelease(l.ch.inReady[s]);
    flagRelease(l.ch.outAck[s]);
  }
}

void PairRelay::releaseFlags() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& l : links_) releaseChannel(*l);
}

void PairRelay::halt(const std::string& why) {
  if (stop_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> g(mu_);  // the thread between its check and its wait sees it
    if (error_.empty()) error_ = why;
  }
  cv_.notify_all();
  if (transport_) transport_->poison(why);
}

void PairRelay::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);  // the thread between its check and its wait sees it
    leaving_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string PairRelay::error() const {
  std::lock_guard<std::mutex> g(mu_);
  return error_;
}

void PairRelay::failed(hetcclResult_t code, const std::string& why) {
  bool waiting;
  {
    // error_ set under the lock that announce() takes: a part announced
    // after this finds it (and fails its call); one announced before is
    // counted here.
    std::lock_guard<std::mutex> g(mu_);
    if (error_.empty()) error_ = why;
    waiting = pending();
  }
  if (stop_.load()) return;  // halted: whoever halted it released the streams
  if (!waiting) {
    // Nothing of this rank waits on the relay (a peer that ended without
    // destroying its communicator, say): the peers' relays end too, and the
    // next send/recv across hosts fails at once with this reason (channel()).
    LOG_INFO(kColl, "send/recv relay ended with nothing in flight: %s", why.c_str());
    halt(why);
    return;
  }
  LOG_WARN(kColl, "send/recv relay failed: %s", why.c_str());
  halt(why);
  // The communicator records the failure before this rank's streams that
  // wait on the relay go on (a program that syncs its stream, then asks
  // hetcclCommGetAsyncError, reads it).
  if (onFailure_ && !leaving_.load()) onFailure_(code, why);
  releaseFlags();
}

bool PairRelay::pending() const {
  for (const auto& l : links_)
    if (!l->outs.empty() || !l->ins.empty()) return true;
  return false;
}

uint64_t PairRelay::agree(uint64_t base, const Side& ready, const Side& room, const std::string& what) {
  const uint64_t upTo = std::min(ready.upTo, room.upTo);
  if (upTo > base + kSlots || ready.upTo < base || room.upTo < base)
    throwError(hetcclRemoteError, "send/recv relay: " + what + ": a status out of step (parts " + std::to_string(base) +
                                      " moved, ready " + std::to_string(ready.upTo) + ", room " +
                                      std::to_string(room.upTo) + ")");
  for (uint64_t n = base + 1; n <= upTo; ++n) {
    const size_t j = static_cast<size_t>(n - base - 1);
    if (ready.lens[j] != room.lens[j] || ready.msgs[j] != room.msgs[j])
      throwError(hetcclInvalidUsage, "send/recv " + what + ": a send of " + std::to_string(ready.msgs[j]) +
                                         " bytes meets a receive of " + std::to_string(room.msgs[j]) + " bytes (part " +
                                         std::to_string(n) + " of the pair's traffic)");
  }
  return upTo;
}

PairRelay::Status PairRelay::statusOf(Link& l, uint64_t round) {
  Status st;
  st.round = round;
  st.out.upTo = l.sent;
  st.in.upTo = l.received;
  if (!l.made.load(std::memory_order_acquire)) return st;
  const PairChannel& ch = l.ch;
  for (size_t j = 0; j < l.outs.size() && j < static_cast<size_t>(kSlots); ++j) {
    const uint64_t n = l.sent + 1 + j, v = flagLoad(ch.outReady[n % kSlots]);
    if (v == kFlagReleased) throwError(hetcclRemoteError, "send/recv relay: this rank's outbox was released");
    if (v < n) break;
    st.out.lens[j] = static_cast<uint32_t>(l.outs[j].first);
    st.out.msgs[j] = l.outs[j].second;
    st.out.upTo = n;
  }
  while (l.acked < l.received && flagLoad(ch.inAck[(l.acked + 1) % kSlots]) >= l.acked + 1) ++l.acked;
  const uint64_t room = std::min<uint64_t>(l.acked + kSlots, l.received + l.ins.size());
  for (uint64_t n = l.received + 1; n <= room; ++n) {
    const size_t j = static_cast<size_t>(n - l.received - 1);
    st.in.lens[j] = static_cast<uint32_t>(l.ins[j].first);
    st.in.msgs[j] = l.ins[j].second;
    st.in.upTo = n;
  }
  return st;
}

void PairRelay::move(std::vector<Xfer>& x) {
  try {
    transport_->run(x);
  } catch (const Error& e) {
    throwError(e.code(), std::string("send/recv relay across hosts: ") + e.what());
  }
}

PairRelay::Round PairRelay::round(uint64_t n, bool bye) {
  std::vector<Link*> on;
  std::vector<Status> mine, theirs;
  {
    std::lock_guard<std::mutex> g(mu_);
    const uint32_t busy = (movedLast_ ? kMoved : 0) | (pending() ? kWaiting : 0);
    for (auto& l : links_)
      if (!l->gone) {
        on.push_back(l.get());
        mine.push_back(statusOf(*l, n));
        mine.back().bye = bye ? 1 : 0;
        mine.back().busy = busy;
      }
  }
  theirs.resize(on.size());
  std::vector<Xfer> x;
  for (size_t k = 0; k < on.size(); ++k) {
    x.push_back(Xfer::send(on[k]->peer, &mine[k], sizeof(Status), tag(n, kStatus)));
    x.push_back(Xfer::recv(on[k]->peer, &theirs[k], sizeof(Status), tag(n, kStatus)));
  }
  move(x);
  x.clear();
  std::vector<uint64_t> outTo(on.size()), inTo(on.size());
  uint64_t bytes = 0;
  for (size_t k = 0; k < on.size(); ++k) {
    Link& l = *on[k];
    const std::string me = "rank " + std::to_string(l.peer);
    if (theirs[k].round != n)
      throwError(hetcclRemoteError, "send/recv relay: " + me + " is in round " + std::to_string(theirs[k].round) +
                                        ", this rank in round " + std::to_string(n));
    outTo[k] = agree(l.sent, mine[k].out, theirs[k].in, "to " + me);
    inTo[k] = agree(l.received, theirs[k].out, mine[k].in, "from " + me);
    for (uint64_t p = l.sent + 1; p <= outTo[k]; ++p) {
      const uint32_t len = mine[k].out.lens[p - l.sent - 1];
      x.push_back(Xfer::send(l.peer, l.ch.outData[p % kSlots], len, tag(n, kParts)));
      bytes += len;
    }
    for (uint64_t p = l.received + 1; p <= inTo[k]; ++p)
      x.push_back(Xfer::recv(l.peer, l.ch.inData[p % kSlots], theirs[k].out.lens[p - l.received - 1], tag(n, kParts)));
  }
  if (!x.empty()) move(x);
  if (metrics_ && bytes) metrics_->linkBytes(CallMetrics::kBorderRemote, bytes);
  std::lock_guard<std::mutex> g(mu_);
  for (size_t k = 0; k < on.size(); ++k) {
    Link& l = *on[k];
    for (uint64_t p = l.sent + 1; p <= outTo[k]; ++p) {
      flagRaise(l.ch.outAck[p % kSlots], p);  // the part left the outbox: the stream may fill the slot again
      l.outs.pop_front();
    }
    for (uint64_t p = l.received + 1; p <= inTo[k]; ++p) {
      flagRaise(l.ch.inReady[p % kSlots], p);
      l.ins.pop_front();
    }
    l.sent = outTo[k];
    l.received = inTo[k];
    if (theirs[k].bye) {
      l.gone = true;
      if (!l.outs.empty() || !l.ins.empty())
        throwError(hetcclRemoteError, "send/recv relay: rank " + std::to_string(l.peer) +
                                          " left (destroyed its communicator) with " +
                                          std::to_string(l.outs.size() + l.ins.size()) +
                                          " part(s) of send/recv between it and this rank not moved");
    }
  }
  Round r;
  r.moved = movedLast_ = !x.empty();
  for (const Status& st : theirs) {
    r.peerMoved = r.peerMoved || (st.busy & kMoved);
    r.peerWaiting = r.peerWaiting || (st.busy & kWaiting);
  }
  return r;
}

void PairRelay::loop() {
  uint64_t n = 0, seen = 0;
  double leavingSince = 0;
  int empty = 0;  // rounds in a row that moved nothing
  try {
    for (;;) {
      bool bye = false;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (stop_.load()) return;
        // The communicator's end: what is announced may still move for a
        // while (the last calls' parts on their way), then goodbye.
        if (leaving_.load()) {
          if (leavingSince == 0) leavingSince = clockUs();
          bye = !pending() || clockUs() - leavingSince > 5e6;
        }
        if (std::all_of(links_.begin(), links_.end(), [](const auto& l) { return l->gone; })) {
          // Every peer left: nothing to go round with until this rank leaves.
          cv_.wait(lk, [&] { return stop_.load() || leaving_.load(); });
          return;
        }
        seen = announced_;
      }
      const Round r = round(++n, bye);
      if (bye) break;
      empty = r.moved || r.peerMoved ? 0 : empty + 1;
      if (empty < kBusyRounds) continue;
      // Nothing moved for a while: wait before the next round, up to
      // kIdleUs with nothing announced here or at a peer, less while parts
      // wait on a stream or a peer (their flags are polled, not signalled);
      // a new announcement ends the wait at once.
      std::unique_lock<std::mutex> lk(mu_);
      const double us = pending() || r.peerWaiting
                            ? std::min(kPendingUs, static_cast<double>(1 << std::min(empty - kBusyRounds, 10)))
                            : kIdleUs;
      cv_.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>(us)),
                   [&] { return stop_.load() || leaving_.load() || announced_ != seen; });
    }
  } catch (const Error& e) {
    failed(e.code(), e.what());
  } catch (const std::exception& e) {
    failed(hetcclInternalError, e.what());
  }
}

}  // namespace hetccl
