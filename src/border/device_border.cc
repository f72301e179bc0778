#include "border/device_border.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/auth.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "device/host_flag.h"
#include "kernels/kernels_api.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {
namespace {

constexpr size_t kFlagStride = 64;  // one cache line per flag: no false sharing between writers
constexpr uint64_t kMagic = 0x6865746363426472ull;
constexpr uint64_t kNameSalt = 0x626f72646572ull;  // keeps these names apart from the shm transport's
constexpr uint64_t kLinkSalt = 0x6c696e6bull;      // ... and the pair links' from the border segments
constexpr size_t kMinPart = size_t{64} << 10;
constexpr size_t kHeaderBytes = 512;

// The first bytes of every rank's segment. failedBy is this job's failure
// word on this host: 1 + the first rank whose communicator failed (each
// rank marks every rank's header); its reason is in that rank's header.
struct Header {
  uint64_t magic;
  uint64_t jobId;
  std::atomic<int32_t> failedBy;
  int32_t pad;
  char reason[kHeaderBytes - 24];
};
static_assert(sizeof(Header) <= kHeaderBytes, "the header outgrew its room");

uint8_t* mapSegment(int fd, size_t bytes, const std::string& name) {
  return mapShmSegment(fd, bytes, "device border: " + name);
}

}  // namespace

static_assert(DeviceBorder::kSlots == PairChannel::kSlots, "pair channels of both kinds count slots alike");

std::unique_ptr<DeviceBorder> DeviceBorder::create(const Setup& s) {
  std::unique_ptr<DeviceBorder> b(new DeviceBorder);
  b->dev_ = s.device;
  b->peerRanks_ = s.peerRanks;
  b->me_ = s.me;
  b->shares_ = s.shares;
  b->minBytes_ = s.minBytes;
  b->releaseToo_ = s.releaseToo;
  const int g = b->peers();
  // Header, then per slot: ready, done, ack by each reader; then per reader
  // and slot the pair channel's ready and ack; a pair log per reader; then
  // the slots' data, then the pair channels' data (kSlots parts for each
  // other peer).
  b->pairFlagsAt_ = kHeaderBytes + static_cast<size_t>(kSlots) * (2 + g) * kFlagStride;
  b->pairLogsAt_ = b->pairFlagsAt_ + static_cast<size_t>(kSlots) * 2 * g * kFlagStride;
  b->flagBytes_ = pageRound(b->pairLogsAt_ + static_cast<size_t>(g) * sizeof(PairLog));
  // Per slot g parts out and 1 result, plus g - 1 pair-channel parts per slot.
  auto segFor = [&](size_t part) { return b->flagBytes_ + static_cast<size_t>(kSlots) * 2 * g * part; };
  // Send/recv with GPU ranks of other groups on this host that are not
  // border peers: pair links, in parts of at most PairLinks::kMaxPart.
  std::vector<std::vector<int>> linkLists;
  for (int r = 0; r < static_cast<int>(s.groupOf.size()); ++r)
    linkLists.push_back(PairLinks::linksOf(r, s.groupOf, s.groupRank, s.shares, s.hostOf));
  const size_t myLinks = linkLists.empty() ? 0 : linkLists[s.rank].size();
  auto linkPart = [](size_t part) { return std::min(part, PairLinks::kMaxPart); };
  auto needFor = [&](size_t part) {
    return (g > 1 ? segFor(part) : 0) + PairLinks::segmentBytes(myLinks, linkPart(part));
  };
  const size_t want = std::max<size_t>(4096, s.partBytes / 4096 * 4096);
  const size_t floor = std::min(kMinPart, want);
  size_t part = want;
  struct statvfs vfs {};
  if ((g > 1 || myLinks) && statvfs("/dev/shm", &vfs) == 0) {
    const size_t room = static_cast<size_t>(vfs.f_bavail) * vfs.f_frsize / 2 / std::max(1, s.ranksOnHost);
    while (part > floor && needFor(part) > room) part = std::max(floor, part / 2 / 4096 * 4096);
    if (needFor(part) > room) part = 0;
  }

  // Names: this job's id with a nonce of rank 0's (two runs never meet).
  struct Entry {
    int32_t pid;
    uint32_t mps;  // MPS shares this rank's GPU contexts
    uint64_t nonce;
    uint64_t part;
    uint64_t gpu;  // DeviceRuntime::physicalGpu
  };
  const int nranks = s.bootstrap->nranks();
  std::vector<Entry> all(nranks, Entry{});
  all[s.rank].pid = static_cast<int32_t>(getpid());
  randomBytes(&all[s.rank].nonce, sizeof(uint64_t));
  all[s.rank].part = part;
  all[s.rank].gpu = s.device->physicalGpu();
  all[s.rank].mps = s.device->mpsShared() ? 1 : 0;
  s.bootstrap->allGather(all.data(), sizeof(Entry));
  std::vector<uint64_t> gpus;
  std::vector<bool> mps;
  auto hostOf = [&](int r) { return s.hostOf.empty() ? 0 : s.hostOf[r]; };
  for (int r = 0; r < nranks; ++r) {
    // Two ranks share a GPU only on one host (the same PCI address on two
    // hosts is two GPUs).
    const uint64_t gpu = all[r].gpu ^ (static_cast<uint64_t>(hostOf(r)) * 0x9e3779b97f4a7c15ull);
    gpus.push_back(all[r].gpu ? (gpu ? gpu : 1) : 0);
    mps.push_back(all[r].mps != 0);
  }
  b->timeSliced_ = timeSlicedGpus(gpus, mps);
  if (!s.minIsSet && !b->timeSliced_) b->minBytes_ = 0;
  b->remote_.assign(g, false);
  for (int q = 0; q < g; ++q) b->remote_[q] = hostOf(s.peerRanks[q]) != hostOf(s.rank);
  const bool anyRemote = std::find(b->remote_.begin(), b->remote_.end(), true) != b->remote_.end();
  // The round kernel would spin on flags the relay stores after a network
  // round trip: slot uses with remote peers go by copies.
  b->round_ = s.canRound && !anyRemote && g >= 2 && g <= HETCCL_BORDER_ROUND_MAX_PEERS &&
              (s.roundKernel == "1" || (s.roundKernel == "auto" && !b->timeSliced_));
  const uint64_t jobId = s.bootstrap->id().jobId ^ all[0].nonce ^ kNameSalt;
  for (const Entry& e : all) part = std::min<size_t>(part, e.part);
  if (part == 0) {
    LOG_INFO(kInit,
             "rank %d: no device border: /dev/shm has too little room for its segments "
             "(HETCCL_GPU_BORDER_CHUNK %zu)",
             s.rank, s.partBytes);
    return nullptr;
  }
  b->partBytes_ = part;
  // Without peers, a segment of the header alone (the failure word).
  b->segBytes_ = g > 1 ? segFor(part) : pageRound(kHeaderBytes);
  b->seg_.assign(g, nullptr);
  b->registered_.assign(g, false);
  b->headers_.assign(nranks, nullptr);
  b->rank_ = s.rank;

  const std::string mine = shmSegmentName(all[s.rank].pid, jobId, s.rank);
  uint8_t* own = mapSegment(createShmSegment(mine, b->segBytes_), b->segBytes_, mine);
  b->seg_[s.me] = own;
  b->headers_[s.rank] = own;
  auto* h = reinterpret_cast<Header*>(own);
  h->magic = kMagic;
  h->jobId = jobId;
  auto linkName = [&](int r) { return shmSegmentName(all[r].pid, jobId ^ kLinkSalt, r); };
  try {
    if (myLinks) {
      b->links_ = std::make_unique<PairLinks>(s.rank, linkLists, linkPart(part));
      b->links_->create(linkName(s.rank));
    }
    s.bootstrap->barrier();  // every segment exists
    if (b->links_) b->links_->mapPeers(linkName);
    // Peers' segments whole (mirrors of those on other hosts), every other
    // rank's header page on this host.
    for (int r = 0; r < nranks; ++r) {
      if (r == s.rank) continue;
      auto it = std::find(s.peerRanks.begin(), s.peerRanks.end(), r);
      const int q = it == s.peerRanks.end() ? -1 : static_cast<int>(it - s.peerRanks.begin());
      if (hostOf(r) != hostOf(s.rank)) {
        if (q < 0) continue;
        b->seg_[q] = mapSegment(-1, b->segBytes_, "mirror of rank " + std::to_string(r));
        continue;
      }
      const std::string name = shmSegmentName(all[r].pid, jobId, r);
      int fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) throwSystemError("device border: shm_open " + name + " (rank " + std::to_string(r) + ")", errno);
      uint8_t* at = mapSegment(fd, q >= 0 ? b->segBytes_ : pageRound(kHeaderBytes), name);
      if (q >= 0)
        b->seg_[q] = at;
      else
        b->headerPages_.push_back(at);
      b->headers_[r] = at;
      auto* ph = reinterpret_cast<const Header*>(at);
      if (ph->magic != kMagic || ph->jobId != jobId)
        throwError(hetcclRemoteError, "device border: segment of rank " + std::to_string(r) + " is not this job's");
    }
    s.bootstrap->barrier();  // every rank mapped what it needs: the names can go
  } catch (...) {
    shm_unlink(mine.c_str());
    throw;
  }
  shm_unlink(mine.c_str());
  if (b->links_) b->links_->unlinkOwn();
  if (s.relayContext) {  // every rank: the relay's transports are made together
    std::vector<int> remote;
    for (int q = 0; q < g; ++q)
      if (b->remote_[q]) remote.push_back(q);
    b->relay_ = BorderRelay::create(*b, s.relayTransport, *s.relayContext, std::move(remote), s.metrics);
    // Send/recv with GPU ranks of other groups on other hosts.
    std::vector<int> far;
    for (int r = 0; r < static_cast<int>(s.groupOf.size()); ++r)
      if (s.groupOf[r] != s.groupOf[s.rank] && hostOf(r) != hostOf(s.rank)) far.push_back(r);
    DeviceBorder* self = b.get();
    b->pairRelay_ = PairRelay::create(*s.device, s.relayTransport, *s.relayContext, std::move(far),
                                      std::min(part, PairLinks::kMaxPart), s.metrics,
                                      [self, then = s.relayFailed](hetcclResult_t code, const std::string& why) {
                                        if (then) then(code, why);  // recorded before the streams go on
                                        self->releaseAll();
                                      });
  }
  const bool relaysPairs = b->pairRelay_ && !b->pairRelay_->peers().empty();
  // Registration and allocation may synchronise the device: here, at init,
  // nothing of this communicator is in flight.
  if (b->links_) {
    b->links_->registerWith(*s.device);
    LOG_INFO(kInit, "rank %d: send/recv links with %zu rank(s) of other groups on this host: %zu bytes shared memory",
             s.rank, myLinks, b->links_->bytes());
  }
  if (g == 1) {
    // One part of device scratch: an in-place AlltoAll's own group's
    // blocks pass through it (ownStaging()).
    b->scratchBytes_ = part;
    b->scratch_ = static_cast<uint8_t*>(s.device->alloc(b->scratchBytes_));
    if (b->links_ || relaysPairs) {  // send/recv over the links or the relay: the internal streams
      b->out_ = s.device->createStream(s.priority);
      b->in_ = s.device->createStream(s.priority);
    }
    b->makeChannels();
    LOG_INFO(kInit, "rank %d: device border without peers (index %d and up of a larger group: group steps only)",
             s.rank, s.shares);
    return b;
  }
  b->devSeg_.assign(g, nullptr);
  for (int q = 0; q < g; ++q) {
    s.device->registerHost(b->seg_[q], b->segBytes_);
    b->registered_[q] = true;
    b->devSeg_[q] = static_cast<uint8_t*>(s.device->devicePointer(b->seg_[q]));
  }
  b->scratchBytes_ = static_cast<size_t>(g - 1) * part * 2;
  b->scratch_ = static_cast<uint8_t*>(s.device->alloc(b->scratchBytes_));
  b->out_ = s.device->createStream(s.priority);
  b->in_ = s.device->createStream(s.priority);
  b->makeChannels();
  LOG_INFO(kInit,
           "rank %d: device border with %d peers: %d slots of %zu-byte parts, %zu bytes shared memory, %zu "
           "bytes device scratch; calls of %zu bytes and up (HETCCL_GPU_BORDER_MIN%s); small rounds %s; "
           "internal streams at priority %d",
           s.rank, g, kSlots, part, b->segBytes_, b->scratchBytes_, b->minBytes_,
           b->timeSliced_ ? ", GPUs time-sliced between ranks" : "",
           b->round_ ? "in one kernel" : "by copies and stream memory operations", s.device->streamPriority(b->in_));
  return b;
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
