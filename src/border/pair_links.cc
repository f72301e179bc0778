#include "border/pair_links.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/error.h"
#include "device/device.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {
namespace {

constexpr int kSlots = PairChannel::kSlots;
constexpr size_t kFlagStride = 64;  // one cache line per flag

// Per link: kSlots x 2 flags, then one PairLog per link.
size_t logsAt(size_t n) { return n * kSlots * 2 * kFlagStride; }
size_t flagBytes(size_t n) { return pageRound(std::max<size_t>(1, logsAt(n) + n * sizeof(PairLog))); }

uint64_t atomicLoad(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void atomicStore(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

uint8_t* mapShared(int fd, size_t bytes, const std::string& name) {
  return mapShmSegment(fd, bytes, "pair links: " + name);
}

}  // namespace

std::optional<uint64_t> pairLogCheck(PairLog* own, const PairLog* peer, bool send, uint64_t msg, uint64_t bytes) {
  // Through pointers: GCC 12 with -fsanitize=undefined indexes a
  // conditional of two array members wrongly (the entry read back empty).
  PairLog::Entry* mine = send ? own->sends : own->recvs;
  const PairLog::Entry* theirSide = send ? peer->recvs : peer->sends;
  PairLog::Entry& e = mine[msg % PairLog::kMsgs];
  atomicStore(&e.msg, 0);  // a reader that meets the entry meanwhile drops it
  atomicStore(&e.bytes, bytes);
  atomicStore(&e.msg, msg);
  const PairLog::Entry& t = theirSide[msg % PairLog::kMsgs];
  const uint64_t before = atomicLoad(&t.msg), theirs = atomicLoad(&t.bytes), after = atomicLoad(&t.msg);
  if (before != msg || after != msg) return std::nullopt;
  return theirs;
}

std::vector<int> PairLinks::linksOf(int r, const std::vector<int>& groupOf, const std::vector<int>& groupRank,
                                    int shares, const std::vector<int>& hostOf) {
  std::vector<int> out;
  auto host = [&](int x) { return hostOf.empty() ? 0 : hostOf[x]; };
  for (int t = 0; t < static_cast<int>(groupOf.size()); ++t) {
    if (t == r || groupOf[t] == groupOf[r] || host(t) != host(r)) continue;
    if (groupRank[t] == groupRank[r] && groupRank[r] < shares) continue;  // border peers
    out.push_back(t);
  }
  return out;
}

size_t PairLinks::segmentBytes(size_t n, size_t part) { return n ? flagBytes(n) + n * kSlots * part : 0; }

PairLinks::PairLinks(int rank, std::vector<std::vector<int>> linksByRank, size_t part)
    : rank_(rank), links_(std::move(linksByRank)), part_(part) {}

PairLinks::~PairLinks() {
  for (uint8_t* p : registered_) dev_->unregisterHost(p);
  for (size_t k = 0; k < peers_.size(); ++k) munmap(peers_[k], segmentBytes(links_[mine()[k]].size(), part_));
  if (own_) munmap(own_, bytes());
  if (!name_.empty()) shm_unlink(name_.c_str());
}

void PairLinks::create(const std::string& name) {
  if (empty()) return;
  const int fd = createShmSegment(name, bytes());
  name_ = name;  // unlinked by the destructor should the mapping fail
  own_ = mapShared(fd, bytes(), name);
}

void PairLinks::mapPeers(const std::function<std::string(int)>& nameOf) {
  for (int t : mine()) {
    const std::vector<int>& theirs = links_[t];
    if (std::find(theirs.begin(), theirs.end(), rank_) == theirs.end())
      throwError(hetcclInternalError, "pair links: rank " + std::to_string(t) + " has no link to rank " +
                                          std::to_string(rank_) + " (the link lists disagree)");
    const std::string name = nameOf(t);
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) throwSystemError("pair links: shm_open " + name + " (rank " + std::to_string(t) + ")", errno);
    peers_.push_back(mapShared(fd, segmentBytes(theirs.size(), part_), name));
  }
}

void PairLinks::unlinkOwn() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

void PairLinks::registerWith(DeviceRuntime& d) {
  dev_ = &d;
  if (empty()) return;
  d.registerHost(own_, bytes());
  registered_.push_back(own_);
  for (size_t k = 0; k < peers_.size(); ++k) {
    d.registerHost(peers_[k], segmentBytes(links_[mine()[k]].size(), part_));
    registered_.push_back(peers_[k]);
  }
}

volatile uint64_t* PairLinks::flag(uint8_t* seg, size_t reader, int slot, int which) const {
  return reinterpret_cast<volatile uint64_t*>(seg + ((reader * kSlots + slot) * 2 + which) * kFlagStride);
}

std::vector<PairChannel> PairLinks::channels() {
  std::vector<PairChannel> out;
  for (size_t k = 0; k < peers_.size(); ++k) {
    const int t = mine()[k];
    const std::vector<int>& theirs = links_[t];
    const size_t at = static_cast<size_t>(std::find(theirs.begin(), theirs.end(), rank_) - theirs.begin());
    PairChannel ch;
    ch.peer = t;
    ch.partBytes = part_;
    for (int s = 0; s < kSlots; ++s) {
      ch.outReady[s] = flag(own_, k, s, 0);
      ch.outAck[s] = flag(own_, k, s, 1);
      ch.outData[s] = own_ + flagBytes(mine().size()) + (k * kSlots + s) * part_;
      ch.inReady[s] = flag(peers_[k], at, s, 0);
      ch.inAck[s] = flag(peers_[k], at, s, 1);
      ch.inData[s] = peers_[k] + flagBytes(theirs.size()) + (at * kSlots + s) * part_;
    }
    ch.ownLog = reinterpret_cast<PairLog*>(own_ + logsAt(mine().size()) + k * sizeof(PairLog));
    ch.peerLog = reinterpret_cast<const PairLog*>(peers_[k] + logsAt(theirs.size()) + at * sizeof(PairLog));
    out.push_back(ch);
  }
  return out;
}

}  // namespace hetccl
