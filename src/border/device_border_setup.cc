// DeviceBorder::create and its steps: the segment's layout, the part size
// that fits /dev/shm, what every rank publishes (one allgather), the
// segments and their maps, the relays across hosts, and the registration,
// scratch and streams (all at init: they may synchronise the device).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "border/device_border.h"
#include "border/device_border_layout.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/kernels_api.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

using namespace border_layout;

namespace {

// What each rank publishes at create.
struct Entry {
  int32_t pid;
  uint32_t mps;  // MPS shares this rank's GPU contexts
  uint64_t nonce;
  uint64_t part;
  uint64_t gpu;  // DeviceRuntime::physicalGpu
};

}  // namespace

std::unique_ptr<DeviceBorder> DeviceBorder::create(const Setup& s) {
  std::unique_ptr<DeviceBorder> b(new DeviceBorder);
  b->dev_ = s.device;
  b->peerRanks_ = s.peerRanks;
  b->me_ = s.me;
  b->shares_ = s.shares;
  b->minBytes_ = s.minBytes;
  b->releaseToo_ = s.releaseToo;
  b->rank_ = s.rank;
  b->layOut();
  // Send/recv with GPU ranks of other groups on this host that are not
  // border peers: pair links, in parts of at most PairLinks::kMaxPart.
  std::vector<std::vector<int>> linkLists;
  for (int r = 0; r < static_cast<int>(s.groupOf.size()); ++r)
    linkLists.push_back(PairLinks::linksOf(r, s.groupOf, s.groupRank, s.shares, s.hostOf));
  const size_t myLinks = linkLists.empty() ? 0 : linkLists[s.rank].size();
  const Agreed agreed = b->agree(s, b->partThatFits(s, myLinks));
  if (agreed.part == 0) {
    LOG_INFO(kInit,
             "rank %d: no device border: /dev/shm has too little room for its segments "
             "(HETCCL_GPU_BORDER_CHUNK %zu)",
             s.rank, s.partBytes);
    return nullptr;
  }
  b->mapSegments(s, agreed, linkLists, myLinks);
  if (s.relayContext) b->startRelays(s);  // every rank: the relays' transports are made together
  b->registerAndAllocate(s, myLinks);
  b->track(true);
  return b;
}

void DeviceBorder::layOut() {
  const int g = peers();
  // Header, then per slot: ready, done, ack by each reader; then per reader
  // and slot the pair channel's ready and ack; a pair log per reader; then
  // the slots' data, then the pair channels' data (kSlots parts for each
  // other peer).
  pairFlagsAt_ = kHeaderBytes + static_cast<size_t>(kSlots) * (2 + g) * kFlagStride;
  pairLogsAt_ = pairFlagsAt_ + static_cast<size_t>(kSlots) * 2 * g * kFlagStride;
  flagBytes_ = pageRound(pairLogsAt_ + static_cast<size_t>(g) * sizeof(PairLog));
}

size_t DeviceBorder::segmentBytesFor(size_t part) const {
  // Per slot g parts out and 1 result, plus g - 1 pair-channel parts per slot.
  return flagBytes_ + static_cast<size_t>(kSlots) * 2 * peers() * part;
}

size_t DeviceBorder::partThatFits(const Setup& s, size_t myLinks) const {
  const int g = peers();
  auto linkPart = [](size_t part) { return std::min(part, PairLinks::kMaxPart); };
  auto needFor = [&](size_t part) {
    return (g > 1 ? segmentBytesFor(part) : 0) + PairLinks::segmentBytes(myLinks, linkPart(part));
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
  return part;
}

DeviceBorder::Agreed DeviceBorder::agree(const Setup& s, size_t part) {
  const int g = peers();
  const int nranks = s.bootstrap->nranks();
  // Names: this job's id with a nonce of rank 0's (two runs never meet).
  std::vector<Entry> all(nranks, Entry{});
  all[s.rank].pid = static_cast<int32_t>(getpid());
  randomBytes(&all[s.rank].nonce, sizeof(uint64_t));
  all[s.rank].part = part;
  all[s.rank].gpu = s.device->physicalGpu();
  all[s.rank].mps = s.device->mpsShared() ? 1 : 0;
  s.bootstrap->allGather(all.data(), sizeof(Entry));
  std::vector<uint64_t> gpus;
  std::vector<bool> mps;
  for (int r = 0; r < nranks; ++r) {
    // Two ranks share a GPU only on one host (the same PCI address on two
    // hosts is two GPUs).
    const uint64_t gpu = all[r].gpu ^ (static_cast<uint64_t>(hostOf(s, r)) * 0x9e3779b97f4a7c15ull);
    gpus.push_back(all[r].gpu ? (gpu ? gpu : 1) : 0);
    mps.push_back(all[r].mps != 0);
  }
  timeSliced_ = timeSlicedGpus(gpus, mps);
  if (!s.minIsSet && !timeSliced_) minBytes_ = 0;
  remote_.assign(g, false);
  for (int q = 0; q < g; ++q) remote_[q] = hostOf(s, s.peerRanks[q]) != hostOf(s, s.rank);
  const bool anyRemote = std::find(remote_.begin(), remote_.end(), true) != remote_.end();
  // The round kernel would spin on flags the relay stores after a network
  // round trip: slot uses with remote peers go by copies.
  round_ = s.canRound && !anyRemote && g >= 2 && g <= HETCCL_BORDER_ROUND_MAX_PEERS &&
           (s.roundKernel == "1" || (s.roundKernel == "auto" && !timeSliced_));
  Agreed a;
  a.jobId = s.bootstrap->id().jobId ^ all[0].nonce ^ kNameSalt;
  a.part = part;
  for (const Entry& e : all) {
    a.part = std::min<size_t>(a.part, e.part);
    a.pids.push_back(e.pid);
  }
  return a;
}

void DeviceBorder::mapSegments(const Setup& s, const Agreed& a, const std::vector<std::vector<int>>& linkLists,
                               size_t myLinks) {
  const int g = peers();
  const int nranks = s.bootstrap->nranks();
  partBytes_ = a.part;
  // Without peers, a segment of the header alone (the failure word).
  segBytes_ = g > 1 ? segmentBytesFor(a.part) : pageRound(kHeaderBytes);
  seg_.assign(g, nullptr);
  registered_.assign(g, false);
  headers_.assign(nranks, nullptr);
  const std::string mine = shmSegmentName(a.pids[s.rank], a.jobId, s.rank);
  uint8_t* own = mapSegment(createShmSegment(mine, segBytes_), segBytes_, mine);
  seg_[s.me] = own;
  headers_[s.rank] = own;
  auto* h = reinterpret_cast<Header*>(own);
  h->magic = kMagic;
  h->jobId = a.jobId;
  auto linkName = [&](int r) { return shmSegmentName(a.pids[r], a.jobId ^ kLinkSalt, r); };
  try {
    if (myLinks) {
      links_ = std::make_unique<PairLinks>(s.rank, linkLists, std::min(a.part, PairLinks::kMaxPart));
      links_->create(linkName(s.rank));
    }
    s.bootstrap->barrier();  // every segment exists
    if (links_) links_->mapPeers(linkName);
    // Peers' segments whole (mirrors of those on other hosts), every other
    // rank's header page on this host.
    for (int r = 0; r < nranks; ++r) {
      if (r == s.rank) continue;
      auto it = std::find(s.peerRanks.begin(), s.peerRanks.end(), r);
      const int q = it == s.peerRanks.end() ? -1 : static_cast<int>(it - s.peerRanks.begin());
      if (hostOf(s, r) != hostOf(s, s.rank)) {
        if (q < 0) continue;
        seg_[q] = mapSegment(-1, segBytes_, "mirror of rank " + std::to_string(r));
        continue;
      }
      const std::string name = shmSegmentName(a.pids[r], a.jobId, r);
      int fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) throwSystemError("device border: shm_open " + name + " (rank " + std::to_string(r) + ")", errno);
      uint8_t* at = mapSegment(fd, q >= 0 ? segBytes_ : pageRound(kHeaderBytes), name);
      if (q >= 0)
        seg_[q] = at;
      else
        headerPages_.push_back(at);
      headers_[r] = at;
      auto* ph = reinterpret_cast<const Header*>(at);
      if (ph->magic != kMagic || ph->jobId != a.jobId)
        throwError(hetcclRemoteError, "device border: segment of rank " + std::to_string(r) + " is not this job's");
    }
    s.bootstrap->barrier();  // every rank mapped what it needs: the names can go
  } catch (...) {
    shm_unlink(mine.c_str());
    throw;
  }
  shm_unlink(mine.c_str());
  if (links_) links_->unlinkOwn();
}

void DeviceBorder::startRelays(const Setup& s) {
  std::vector<int> remote;
  for (int q = 0; q < peers(); ++q)
    if (remote_[q]) remote.push_back(q);
  relay_ = BorderRelay::create(*this, s.relayTransport, *s.relayContext, std::move(remote), s.metrics);
  // Send/recv with GPU ranks of other groups on other hosts.
  std::vector<int> far;
  for (int r = 0; r < static_cast<int>(s.groupOf.size()); ++r)
    if (s.groupOf[r] != s.groupOf[s.rank] && hostOf(s, r) != hostOf(s, s.rank)) far.push_back(r);
  pairRelay_ = PairRelay::create(*s.device, s.relayTransport, *s.relayContext, std::move(far),
                                 std::min(partBytes_, PairLinks::kMaxPart), s.metrics,
                                 [this, then = s.relayFailed](hetcclResult_t code, const std::string& why) {
                                   if (then) then(code, why);  // recorded before the streams go on
                                   releaseAll();
                                 });
}

void DeviceBorder::registerAndAllocate(const Setup& s, size_t myLinks) {
  const int g = peers();
  const bool relaysPairs = pairRelay_ && !pairRelay_->peers().empty();
  // Registration and allocation may synchronise the device: here, at init,
  // nothing of this communicator is in flight.
  if (links_) {
    links_->registerWith(*s.device);
    LOG_INFO(kInit, "rank %d: send/recv links with %zu rank(s) of other groups on this host: %zu bytes shared memory",
             s.rank, myLinks, links_->bytes());
  }
  if (g == 1) {
    // One part of device scratch: an in-place AlltoAll's own group's
    // blocks pass through it (ownStaging()).
    scratchBytes_ = partBytes_;
    scratch_ = static_cast<uint8_t*>(s.device->alloc(scratchBytes_));
    if (links_ || relaysPairs) {  // send/recv over the links or the relay: the internal streams
      out_ = s.device->createStream(s.priority);
      in_ = s.device->createStream(s.priority);
    }
    makeChannels();
    LOG_INFO(kInit, "rank %d: device border without peers (index %d and up of a larger group: group steps only)",
             s.rank, s.shares);
    return;
  }
  devSeg_.assign(g, nullptr);
  for (int q = 0; q < g; ++q) {
    s.device->registerHost(seg_[q], segBytes_);
    registered_[q] = true;
    devSeg_[q] = static_cast<uint8_t*>(s.device->devicePointer(seg_[q]));
  }
  scratchBytes_ = static_cast<size_t>(g - 1) * partBytes_ * 2;
  scratch_ = static_cast<uint8_t*>(s.device->alloc(scratchBytes_));
  out_ = s.device->createStream(s.priority);
  in_ = s.device->createStream(s.priority);
  makeChannels();
  LOG_INFO(kInit,
           "rank %d: device border with %d peers: %d slots of %zu-byte parts, %zu bytes shared memory, %zu "
           "bytes device scratch; calls of %zu bytes and up (HETCCL_GPU_BORDER_MIN%s); small rounds %s; "
           "internal streams at priority %d",
           s.rank, g, kSlots, partBytes_, segBytes_, scratchBytes_, minBytes_,
           timeSliced_ ? ", GPUs time-sliced between ranks" : "",
           round_ ? "in one kernel" : "by copies and stream memory operations", s.device->streamPriority(in_));
}

}  // namespace hetccl
