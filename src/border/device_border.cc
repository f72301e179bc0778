#include "border/device_border.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/auth.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "device/host_flag.h"
#include "kernels/kernels_api.h"
#include "border/device_border_layout.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

using namespace border_layout;

static_assert(DeviceBorder::kSlots == PairChannel::kSlots, "pair channels of both kinds count slots alike");

namespace {

// The borders of this process, for markLeft() at a normal exit (a program
// that never destroys its communicators). Leaked: exit handlers and other
// static destructors may still reach it.
std::mutex& liveMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<DeviceBorder*>& live() {
  static auto* s = new std::set<DeviceBorder*>;
  return *s;
}
void markLiveLeft() {
  std::lock_guard<std::mutex> g(liveMu());
  for (DeviceBorder* b : live()) b->markLeft();
}

}  // namespace

void DeviceBorder::track(bool on) {
  static std::once_flag once;
  std::call_once(once, [] { atexit(markLiveLeft); });
  std::lock_guard<std::mutex> g(liveMu());
  if (on) {
    live().insert(this);
  } else {
    live().erase(this);
  }
}

void DeviceBorder::markLeft() {
  if (rank_ < static_cast<int>(headers_.size()) && headers_[rank_])
    reinterpret_cast<Header*>(headers_[rank_])->left.store(1, std::memory_order_release);
}

bool DeviceBorder::left(int r) const {
  return r >= 0 && r < static_cast<int>(headers_.size()) && headers_[r] &&
         reinterpret_cast<const Header*>(headers_[r])->left.load(std::memory_order_acquire) != 0;
}

bool DeviceBorder::timeSlicedGpus(const std::vector<uint64_t>& gpu, const std::vector<bool>& mps) {
  for (size_t r = 0; r < gpu.size(); ++r)
    for (size_t t = r + 1; t < gpu.size(); ++t)
      if (gpu[r] && gpu[r] == gpu[t] && !(mps[r] && mps[t])) return true;
  return false;
}

void DeviceBorder::stopRelays() {
  if (pairRelay_) pairRelay_->stop();  // first: a failure in its last round releases through relay_
  if (relay_) relay_->stop();
}

bool DeviceBorder::streamsIdleWithin(double seconds) {
  if (!dev_ || !out_) return true;
  Event e[2] = {dev_->createEvent(), dev_->createEvent()};
  dev_->recordEvent(e[0], out_);
  dev_->recordEvent(e[1], in_);
  const double deadline = clockUs() + seconds * 1e6;
  bool idle = false;
  try {
    while (!(idle = dev_->eventDone(e[0]) && dev_->eventDone(e[1])) && clockUs() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  } catch (const Error&) {
    idle = true;  // a device error: nothing more runs on them
  }
  for (Event x : e) dev_->destroyEvent(x);
  return idle;
}

DeviceBorder::~DeviceBorder() {
  track(false);
  markLeft();
  stopRelays();  // their threads read the segments
  relay_.reset();
  // The internal streams copy into and out of the segments and the pair
  // relay's channels: their work ends before any of that memory goes. After
  // an abort their waits are released and what is left runs at once; a
  // normal end finds them idle, unless a call still waits on a peer (its
  // flags are then released). A stream that still runs after that keeps
  // the memory it may touch: it is left mapped (leaked), never unmapped
  // under a copy.
  bool idle = streamsIdleWithin(2);
  if (!idle) {
    LOG_WARN(kInit, "rank %d: the device border's streams still wait at the communicator's end: releasing them", rank_);
    releaseAll();
    idle = streamsIdleWithin(5);
  }
  if (!idle) {
    LOG_WARN(kInit, "rank %d: the device border's streams did not end: its memory is left mapped", rank_);
    pairRelay_.release();
    links_.release();
    return;
  }
  pairRelay_.reset();
  if (dev_ && out_) {
    dev_->destroyStream(out_);
    dev_->destroyStream(in_);
  }
  if (dev_ && scratch_) dev_->free(scratch_);
  links_.reset();
  for (size_t q = 0; q < seg_.size(); ++q) {
    if (!seg_[q]) continue;
    if (registered_[q]) dev_->unregisterHost(seg_[q]);
    munmap(seg_[q], segBytes_);
  }
  for (uint8_t* p : headerPages_) munmap(p, pageRound(kHeaderBytes));
}

void DeviceBorder::markFailed(const std::string& why) {
  auto* mine = reinterpret_cast<Header*>(headers_[rank_]);
  if (mine->reason[0] == 0) snprintf(mine->reason, sizeof(mine->reason), "%s", why.empty() ? "?" : why.c_str());
  for (uint8_t* h : headers_) {
    int32_t none = 0;
    if (h) reinterpret_cast<Header*>(h)->failedBy.compare_exchange_strong(none, rank_ + 1, std::memory_order_acq_rel);
  }
  // The flags this rank's border peers wait on for it: their streams go on
  // at once and their watches see the release (behind()), instead of
  // waiting for stores this rank will not make. The relay first, with this
  // reason (its threads would else fail on the released flags and tell the
  // remote peers a reason of their own).
  haltRelay(why);
  for (int slot = 0; slot < kSlots && hasPeers(); ++slot) {
    flagRelease(ready(me_, slot));
    flagRelease(done(me_, slot));
    for (int q = 0; q < peers(); ++q)
      if (q != me_) flagRelease(ack(q, me_, slot));
  }
  for (PairChannel& ch : pairs_)
    for (int slot = 0; slot < kSlots; ++slot) {
      flagRelease(ch.outReady[slot]);
      flagRelease(ch.inAck[slot]);
    }
}

int DeviceBorder::failedRank(std::string* why) const {
  const int32_t by = reinterpret_cast<const Header*>(headers_[rank_])->failedBy.load(std::memory_order_acquire);
  if (by <= 0 || by > static_cast<int32_t>(headers_.size()) || !headers_[by - 1]) return -1;
  const auto* h = reinterpret_cast<const Header*>(headers_[by - 1]);
  *why = std::string(h->reason, strnlen(h->reason, sizeof(h->reason)));
  return by - 1;
}

volatile uint64_t* DeviceBorder::flag(int owner, int slot, int which) {
  const size_t at = kHeaderBytes + (static_cast<size_t>(slot) * (2 + peers()) + which) * kFlagStride;
  return reinterpret_cast<volatile uint64_t*>(seg_[owner] + at);
}

uint8_t* DeviceBorder::data(int owner, int slot) {
  return seg_[owner] + flagBytes_ + static_cast<size_t>(slot) * (peers() + 1) * partBytes_;
}

volatile uint64_t* DeviceBorder::pairFlag(int owner, int reader, int slot, int which) {
  const size_t at = pairFlagsAt_ + ((static_cast<size_t>(reader) * kSlots + slot) * 2 + which) * kFlagStride;
  return reinterpret_cast<volatile uint64_t*>(seg_[owner] + at);
}

uint8_t* DeviceBorder::pairData(int owner, int reader, int slot) {
  const size_t channel = static_cast<size_t>(reader < owner ? reader : reader - 1);
  return data(owner, 0) + static_cast<size_t>(kSlots) * (peers() + 1) * partBytes_ +
         (channel * kSlots + static_cast<size_t>(slot)) * partBytes_;
}

void DeviceBorder::releaseAll() {
  // The relays first: none of their stores lands after the release values.
  const std::string why = "rank " + std::to_string(rank_) + " released its device border (it failed or aborted)";
  if (relay_) relay_->halt(why);
  if (pairRelay_) {
    pairRelay_->halt(why);
    pairRelay_->releaseFlags();
  }
  for (int slot = 0; slot < kSlots; ++slot)
    for (int q = 0; q < peers(); ++q) {
      if (q == me_) continue;
      for (volatile uint64_t* f : {ready(q, slot), done(q, slot), ack(me_, q, slot)}) flagRelease(f);
    }
  for (PairChannel& ch : pairs_)
    for (int slot = 0; slot < kSlots; ++slot) {
      flagRelease(ch.inReady[slot]);
      flagRelease(ch.outAck[slot]);
    }
  for (volatile uint64_t* f : releaseToo_) flagRelease(f);
}

void DeviceBorder::announceRead(int q, uint64_t seq, bool results, const void* at, size_t n) {
  if (!relay_ || !remote_[q]) return;
  relay_->announceRead(q, seq, results, static_cast<size_t>(static_cast<const uint8_t*>(at) - seg_[q]), n);
}

void DeviceBorder::commit(uint64_t seq) {
  if (progressUs_.load(std::memory_order_relaxed) != 0) progressUs_.store(clockUs(), std::memory_order_relaxed);
  if (relay_) relay_->commit(seq ? seq : seq_);
}

DeviceBorder::Enqueuing::Enqueuing(DeviceBorder& b) : b_(b) { b_.progressUs_.store(clockUs()); }

DeviceBorder::Enqueuing::~Enqueuing() { b_.progressUs_.store(0); }

double DeviceBorder::enqueueStalledUs() const {
  const double t = progressUs_.load(std::memory_order_relaxed);
  return t != 0 ? clockUs() - t : 0;
}

void DeviceBorder::haltRelay(const std::string& why) {
  if (pairRelay_) {
    pairRelay_->halt(why);
    pairRelay_->releaseFlags();
  }
  if (!relay_) return;
  relay_->halt(why);
  // What the relay would have stored for this rank's streams: released.
  for (int slot = 0; slot < kSlots; ++slot)
    for (int q = 0; q < peers(); ++q) {
      if (!remote_[q]) continue;
      for (volatile uint64_t* f : {ready(q, slot), done(q, slot), ack(me_, q, slot)}) flagRelease(f);
    }
}

std::string DeviceBorder::relayError() const {
  const std::string e = relay_ ? relay_->error() : std::string();
  return !e.empty() || !pairRelay_ ? e : pairRelay_->error();
}

PairChannel* DeviceBorder::localPair(int peer) {
  for (PairChannel& ch : pairs_)
    if (ch.peer == peer) return &ch;
  return nullptr;
}

PairChannel* DeviceBorder::pair(int peer) {
  PairChannel* ch = localPair(peer);
  return ch || !pairRelay_ ? ch : pairRelay_->channel(peer);
}

void DeviceBorder::announce(const PairChannel& ch, bool send, size_t len, size_t msg) {
  if (pairRelay_) pairRelay_->announce(ch, send, len, msg);
}

void DeviceBorder::makeChannels() {
  for (int q = 0; q < peers() && hasPeers(); ++q) {
    if (q == me_ || remote_[q]) continue;  // pair channels do not cross hosts
    PairChannel ch;
    ch.peer = peerRanks_[q];
    ch.partBytes = partBytes_;
    for (int slot = 0; slot < kSlots; ++slot) {
      ch.outReady[slot] = pairFlag(me_, q, slot, 0);
      ch.outAck[slot] = pairFlag(me_, q, slot, 1);
      ch.outData[slot] = pairData(me_, q, slot);
      ch.inReady[slot] = pairFlag(q, me_, slot, 0);
      ch.inAck[slot] = pairFlag(q, me_, slot, 1);
      ch.inData[slot] = pairData(q, me_, slot);
    }
    ch.ownLog = reinterpret_cast<PairLog*>(seg_[me_] + pairLogsAt_ + static_cast<size_t>(q) * sizeof(PairLog));
    ch.peerLog = reinterpret_cast<const PairLog*>(seg_[q] + pairLogsAt_ + static_cast<size_t>(me_) * sizeof(PairLog));
    pairs_.push_back(ch);
  }
  if (links_)
    for (const PairChannel& ch : links_->channels()) pairs_.push_back(ch);
}

bool DeviceBorder::pairBehind(const PairChannel& ch, uint64_t sent, uint64_t received, bool* poisoned) const {
  *poisoned = false;
  for (int slot = 0; slot < kSlots; ++slot)
    if (flagReleased(ch.inReady[slot]) || flagReleased(ch.outAck[slot])) *poisoned = true;
  // What this rank's streams wait for last on each side of the channel.
  if (received && flagLoad(ch.inReady[received % kSlots]) < received) return true;
  return sent > kSlots && flagLoad(ch.outAck[sent % kSlots]) < sent - kSlots;
}

int DeviceBorder::behindReads(const std::vector<uint64_t>& ready, const std::vector<uint64_t>& done, bool* poisoned) {
  behind(0, false, poisoned);  // the release scan alone
  for (int q = 0; q < peers(); ++q) {
    if (q == me_) continue;
    const uint64_t r = q < static_cast<int>(ready.size()) ? ready[q] : 0;
    const uint64_t d = q < static_cast<int>(done.size()) ? done[q] : 0;
    if ((r && flagLoad(this->ready(q, static_cast<int>(r % kSlots))) < r) ||
        (d && flagLoad(this->done(q, static_cast<int>(d % kSlots))) < d))
      return q;
  }
  return -1;
}

int DeviceBorder::behind(uint64_t seq, bool results, bool* poisoned, int writer) {
  *poisoned = false;
  int who = -1;
  const int slot = static_cast<int>(seq % kSlots);
  for (int q = 0; q < peers(); ++q) {
    for (int s2 = 0; s2 < kSlots; ++s2)
      if (flagReleased(ready(q, s2)) || flagReleased(done(q, s2))) *poisoned = true;
    if (q == me_ || who >= 0 || (writer >= 0 && q != writer)) continue;
    if (flagLoad(ready(q, slot)) < seq || (results && flagLoad(done(q, slot)) < seq)) who = q;
  }
  return who;
}

}  // namespace hetccl
