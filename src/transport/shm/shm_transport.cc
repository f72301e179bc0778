#include "transport/shm/shm_transport.h"
#include "core/bytes.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>

#include "elements/host_reduce.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "core/settings.h"
#include "core/error.h"
#include "core/log.h"
#include "core/workers.h"
#include "transport/progress.h"
#include "transport/shm/shm_segment.h"

namespace hetccl {

struct alignas(64) ShmInbox {
  uint64_t magic;
  uint64_t jobId;
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleeping;
  // 1 + the rank of a peer whose communicator failed (poison()); 0: none.
  std::atomic<int32_t> failedBy;
  // Why this rank's communicator failed (its own poison(); read by peers).
  char failReason[160];
  // rings follow at offset kInboxHeader
};

struct SlotHeader {
  MsgTag tag;
  uint64_t offset;  // of this piece within the message
  uint64_t len;
  uint64_t cmaAddr;  // kCma: the whole message stays in the sender's memory at this address
  uint32_t flags;
  uint32_t pad;
};
constexpr uint32_t kCma = 1;
static_assert(sizeof(SlotHeader) == 64, "slot header");

struct alignas(64) ShmRing {
  alignas(64) std::atomic<uint64_t> head;  // slots published by the sender
  alignas(64) std::atomic<uint64_t> tail;  // slots consumed by the receiver
  // slots follow at offset kRingHeader: [SlotHeader][slotBytes data] each
};

namespace {

constexpr uint64_t kMagic = 0x48544c4353484d31ull;  // "HTLCSHM1"
constexpr size_t kInboxHeader = kShmInboxHeader;
constexpr size_t kRingHeader = kShmRingHeader;
constexpr size_t kCmaStagingBytes = 256 * 1024;  // per part, receive-reduce: stays in cache
constexpr size_t kCmaMinPart = 512 << 10;        // smallest share of a message a helper thread takes
static_assert(sizeof(ShmInbox) <= kInboxHeader && sizeof(ShmRing) <= kRingHeader, "layout");

int futexWait(std::atomic<uint32_t>* addr, uint32_t expect, int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  return static_cast<int>(syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT, expect, &ts, nullptr, 0));
}
void futexWake(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Index of `sender`'s ring inside `receiver`'s inbox.
inline size_t ringIndex(int sender, int receiver) { return sender < receiver ? sender : sender - 1; }

}  // namespace

ShmTransport::ShmTransport(const TransportContext& ctx) : ctx_(ctx) {
  const ShmGeometry geo = shmGeometry(ctx.nranks, ctx.buffBytes);
  slotBytes_ = geo.slotBytes;
  slots_ = geo.slots;
  ringBytes_ = geo.ringBytes;
  segBytes_ = geo.segBytes;
  spinUs_ = static_cast<int>(settings::kSpinUs.get());
  oversubscribed_ = ctx.nranks > static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  inbox_.assign(ctx.nranks, nullptr);

  // Every rank must lay its rings out alike (same settings): their pids and
  // geometry in one allgather.
  struct Peer {
    int32_t pid;
    uint32_t slots;
    uint64_t slotBytes;
  };
  std::vector<Peer> peers(ctx.nranks, Peer{});
  peers[ctx.rank] = Peer{static_cast<int32_t>(getpid()), slots_, slotBytes_};
  ctx.bootstrap->allGather(peers.data(), sizeof(Peer));
  pids_.assign(ctx.nranks, 0);
  for (int r = 0; r < ctx.nranks; ++r) {
    pids_[r] = peers[r].pid;
    if (peers[r].slots != slots_ || peers[r].slotBytes != slotBytes_)
      throwError(hetcclInvalidUsage,
                 "shm: rank " + std::to_string(r) + " lays its rings out as " + std::to_string(peers[r].slots) +
                     " slots of " + std::to_string(peers[r].slotBytes) + " bytes but rank " + std::to_string(ctx.rank) +
                     " as " + std::to_string(slots_) + " of " + std::to_string(slotBytes_) +
                     " (HETCCL_BUFFSIZE, HETCCL_SHM_SLOT_BYTES "
                     "and HETCCL_SHM_MAX must agree)");
  }
  if (ctx.rank == 0) removeStaleShmSegments();

  // Segment names: the job id plus a nonce of rank 0's, so two runs of one
  // job configuration never meet.
  std::vector<uint64_t> nonce(ctx.nranks, 0);
  randomBytes(&nonce[ctx.rank], sizeof(uint64_t));
  ctx.bootstrap->allGather(nonce.data(), sizeof(uint64_t));
  uint64_t jobId = ctx.bootstrap->id().jobId ^ nonce[0];
  std::string mine = shmSegmentName(pids_[ctx.rank], jobId, ctx.rank);
  int fd = createShmSegment(mine, segBytes_);
  // Populated now: first touches of ring pages would otherwise cost
  // milliseconds inside the first collectives.
  void* p = mmap(nullptr, segBytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(mine.c_str());
    throwSystemError("mmap " + mine, errno);
  }
  inbox_[ctx.rank] = new (p) ShmInbox{};
  inbox_[ctx.rank]->magic = kMagic;
  inbox_[ctx.rank]->jobId = jobId;
  for (int i = 0; i < ctx.nranks - 1; ++i)
    new (static_cast<uint8_t*>(p) + kInboxHeader + static_cast<size_t>(i) * ringBytes_) ShmRing{};

  // Everyone's segment exists after this barrier; map the peers', then unlink
  // mine once every peer has it mapped, so nothing is left behind on a crash.
  try {
    ctx.bootstrap->barrier();
    for (int peer : ctx.peers) {
      std::string name = shmSegmentName(pids_[peer], jobId, peer);
      int pfd = shm_open(name.c_str(), O_RDWR, 0600);
      if (pfd < 0)
        throwSystemError("shm_open " + name + " (rank " + std::to_string(peer) + " on another host?)", errno);
      void* q = mmap(nullptr, segBytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, pfd, 0);
      close(pfd);
      if (q == MAP_FAILED) throwSystemError("mmap " + name, errno);
      inbox_[peer] = static_cast<ShmInbox*>(q);
      if (inbox_[peer]->magic != kMagic || inbox_[peer]->jobId != jobId)
        throwError(hetcclRemoteError, "shm: segment of rank " + std::to_string(peer) + " is not this job's");
    }
    ctx.bootstrap->barrier();
  } catch (...) {
    shm_unlink(mine.c_str());
    throw;
  }
  shm_unlink(mine.c_str());
  probeCma();
  threads_ = hostThreadsFor(static_cast<int>(ctx.peers.size()) + 1);
  LOG_INFO(kTransport,
           "shm: rank %d mapped %zu peers, %u slots of %zu bytes per ring, single-copy (CMA) %s, %d threads", ctx.rank,
           ctx.peers.size(), slots_, slotBytes_, cma_ ? "on" : "off", threads_);
}

void ShmTransport::probeCma() {
  // Large messages are read straight from the sender's memory with
  // process_vm_readv when every rank may read every peer (same user, no
  // ptrace restrictions); otherwise all go through the rings.
  uint64_t probe = 0x636d612d70726f62ull;
  std::vector<uint64_t> addr(ctx_.nranks, 0);
  addr[ctx_.rank] = reinterpret_cast<uint64_t>(&probe);
  ctx_.bootstrap->allGather(addr.data(), sizeof(uint64_t));
  std::vector<uint8_t> ok(ctx_.nranks, 0);
  ok[ctx_.rank] = settings::kShmCma.get() ? 1 : 0;
  for (int peer : ctx_.peers) {
    uint64_t got = 0;
    iovec local{&got, sizeof(got)}, remote{reinterpret_cast<void*>(addr[peer]), sizeof(got)};
    if (process_vm_readv(pids_[peer], &local, 1, &remote, 1, 0) != sizeof(got) || got != probe) ok[ctx_.rank] = 0;
  }
  ctx_.bootstrap->allGather(ok.data(), 1);
  cma_ = true;
  for (uint8_t v : ok) cma_ = cma_ && v;
  ctx_.bootstrap->barrier();  // peers are done reading `probe`
}

void ShmTransport::cmaReadRange(const Xfer& x, uint64_t addr, size_t lo, size_t hi, uint8_t* staging) {
  auto* dst = static_cast<uint8_t*>(x.dst);
  const bool reduce = x.kind == Xfer::Kind::kRecvReduce;
  const size_t es = reduce ? dataTypeSize(x.dtype) : 1;
  const size_t chunk = reduce ? kCmaStagingBytes / es * es : (size_t{8} << 20);
  for (size_t off = lo; off < hi;) {
    size_t n = std::min(chunk, hi - off);
    uint8_t* into = reduce ? staging : dst + off;
    iovec local{into, n}, remote{reinterpret_cast<void*>(addr + off), n};
    ssize_t r = process_vm_readv(pids_[x.peer], &local, 1, &remote, 1, 0);
    if (r <= 0) {
      const int e = errno;
      if (!processAlive(pids_[x.peer]))
        throwError(hetcclRemoteError, "shm: rank " + std::to_string(x.peer) + " (pid " + std::to_string(pids_[x.peer]) +
                                          ") exited during " + x.tag.describe());
      // A peer that failed (and may have freed its buffer since) or left
      // the job explains a bad address better than a wrong count.
      checkNotPoisoned(&x);
      for (int peer : ctx_.peers)
        if (!processAlive(pids_[peer]))
          throwError(hetcclRemoteError, "shm: rank " + std::to_string(peer) + " (pid " + std::to_string(pids_[peer]) +
                                            ") exited during " + x.tag.describe());
      if (e == EFAULT)
        throwError(hetcclInvalidArgument, "shm: rank " + std::to_string(x.peer) +
                                              "'s buffer (or this rank's) ends "
                                              "before the " +
                                              std::to_string(x.bytes) + " bytes that " + x.tag.describe() +
                                              " moves: is a count larger than its buffer?");
      throwError(hetcclRemoteError, "shm: reading rank " + std::to_string(x.peer) + "'s memory in " + x.tag.describe() +
                                        " failed: " + strerror(e));
    }
    size_t got = static_cast<size_t>(r) / es * es;
    if (reduce) reduceArrays(dst + off, x.operand(off), into, got / es, x.dtype, x.redKind);
    off += got;
  }
}

void ShmTransport::cmaRead(const Xfer& x, uint64_t addr) {
  // Large messages are cut into element-aligned parts that helper threads
  // read (and fold) at once: one thread does not saturate memory.
  const size_t es = x.kind == Xfer::Kind::kRecvReduce ? dataTypeSize(x.dtype) : 1;
  const size_t elems = x.bytes / es;
  const int parts = static_cast<int>(std::clamp<size_t>(x.bytes / kCmaMinPart, 1, static_cast<size_t>(threads_)));
  if (x.kind == Xfer::Kind::kRecvReduce && cmaStaging_.size() < static_cast<size_t>(parts) * kCmaStagingBytes)
    cmaStaging_.resize(static_cast<size_t>(parts) * kCmaStagingBytes);
  if (parts > 1) LOG_TRACE(kTransport, "shm: %zu bytes from rank %d read by %d threads", x.bytes, x.peer, parts);
  runParts(parts, [&](int p) {
    size_t lo = elems * static_cast<size_t>(p) / parts * es, hi = elems * static_cast<size_t>(p + 1) / parts * es;
    if (p == parts - 1) hi = x.bytes;
    cmaReadRange(x, addr, lo, hi, cmaStaging_.data() + static_cast<size_t>(p) * kCmaStagingBytes);
  });
}

ShmTransport::~ShmTransport() {
  for (ShmInbox* p : inbox_)
    if (p) munmap(p, segBytes_);
}

ShmRing* ShmTransport::ringTo(int peer) {
  return reinterpret_cast<ShmRing*>(reinterpret_cast<uint8_t*>(inbox_[peer]) + kInboxHeader +
                                    ringIndex(ctx_.rank, peer) * ringBytes_);
}

ShmRing* ShmTransport::ringFrom(int peer) {
  return reinterpret_cast<ShmRing*>(reinterpret_cast<uint8_t*>(inbox_[ctx_.rank]) + kInboxHeader +
                                    ringIndex(peer, ctx_.rank) * ringBytes_);
}

size_t ShmTransport::injectSlotsForTest(int peer, const std::vector<std::vector<uint8_t>>& slots) {
  ShmRing* r = ringFrom(peer);
  uint64_t head = r->head.load(std::memory_order_relaxed);
  r->tail.store(head, std::memory_order_relaxed);
  const size_t stride = sizeof(SlotHeader) + slotBytes_;
  size_t n = std::min<size_t>(slots.size(), slots_);
  for (size_t i = 0; i < n; ++i, ++head)
    memcpy(reinterpret_cast<uint8_t*>(r) + kRingHeader + (head % slots_) * stride, slots[i].data(),
           std::min(slots[i].size(), stride));
  r->head.store(head, std::memory_order_release);
  return n;
}

void ShmTransport::ring(int rank) {
  ShmInbox* in = inbox_[rank];
  in->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (in->sleeping.load(std::memory_order_seq_cst)) futexWake(&in->doorbell);
}

void ShmTransport::checkPeersAlive(const Xfer& waitingFor) const {
  if (!processAlive(pids_[waitingFor.peer]))
    throwError(hetcclRemoteError, "shm: rank " + std::to_string(waitingFor.peer) + " (pid " +
                                      std::to_string(pids_[waitingFor.peer]) + ") died during " +
                                      waitingFor.tag.describe());
}

void ShmTransport::poison(const std::string& why) {
  ShmInbox* mine = inbox_[ctx_.rank];
  if (!mine) return;
  snprintf(mine->failReason, sizeof(mine->failReason), "%s", why.c_str());
  std::atomic_thread_fence(std::memory_order_release);
  for (int peer : ctx_.peers) {
    if (!inbox_[peer]) continue;
    int32_t none = 0;
    inbox_[peer]->failedBy.compare_exchange_strong(none, ctx_.rank + 1, std::memory_order_acq_rel);
    ring(peer);
  }
}

void ShmTransport::checkNotPoisoned(const Xfer* during) const {
  int32_t by = inbox_[ctx_.rank]->failedBy.load(std::memory_order_acquire);
  if (by <= 0 || by > ctx_.nranks || !inbox_[by - 1]) return;
  char reason[sizeof(ShmInbox::failReason)];
  memcpy(reason, inbox_[by - 1]->failReason, sizeof(reason));
  reason[sizeof(reason) - 1] = 0;
  throwError(hetcclRemoteError, "shm: rank " + std::to_string(by - 1) + "'s communicator failed" +
                                    (during ? " during " + during->tag.describe() : std::string()) + " (" + reason +
                                    "); this communicator can no longer be used");
}

void ShmTransport::drain() {
  if (lazyAcks_.empty()) return;
  std::vector<std::pair<Xfer, uint64_t>> pending;
  pending.swap(lazyAcks_);  // after a failure nothing is left to wait for
  progress({}, &pending);
}

void ShmTransport::run(std::span<Xfer> xfers) { progress(xfers, nullptr); }

void ShmTransport::progress(std::span<Xfer> xfers, std::vector<std::pair<Xfer, uint64_t>>* lazy) {
  struct Lanes {
    std::deque<Xfer*> send, recv;
    std::deque<std::pair<Xfer*, uint64_t>> acks;  // single-copy sends: done when tail passes the slot
  };
  std::map<int, Lanes> work;
  if (lazy)
    for (auto& [x, slot] : *lazy) work[x.peer].acks.emplace_back(&x, slot);
  for (Xfer& x : xfers) {
    if (x.peer < 0 || x.peer >= ctx_.nranks || !inbox_[x.peer] || x.peer == ctx_.rank)
      throwError(hetcclInternalError, "shm: no ring to rank " + std::to_string(x.peer));
    x.done = 0;
    (x.kind == Xfer::Kind::kSend ? work[x.peer].send : work[x.peer].recv).push_back(&x);
  }
  const size_t stride = sizeof(SlotHeader) + slotBytes_;
  ShmInbox* me = inbox_[ctx_.rank];
  checkNotPoisoned(xfers.empty() ? nullptr : &xfers[0]);
  ProgressWatch watch(ctx_.abort, ctx_.timeoutS, "shm");
  auto spinStart = std::chrono::steady_clock::now();
  for (;;) {
    uint32_t bell = me->doorbell.load(std::memory_order_acquire);
    bool progress = false;
    const Xfer* waiting = nullptr;
    for (auto& [peer, lanes] : work) {
      if (!lanes.send.empty() || !lanes.acks.empty()) {
        ShmRing* r = ringTo(peer);
        uint64_t head = r->head.load(std::memory_order_relaxed);
        uint64_t tail = r->tail.load(std::memory_order_acquire);
        bool pushed = false;
        while (!lanes.send.empty() && head - tail < slots_) {
          Xfer* x = lanes.send.front();
          uint8_t* slot = reinterpret_cast<uint8_t*>(r) + kRingHeader + (head % slots_) * stride;
          auto* sh = reinterpret_cast<SlotHeader*>(slot);
          sh->tag = x->tag;
          sh->offset = x->done;
          if (cma_ && x->bytes > slotBytes_) {
            // Single copy: the receiver reads the message from here; it is
            // ours again once the receiver has consumed this slot.
            sh->len = x->bytes;
            sh->flags = kCma;
            sh->cmaAddr = reinterpret_cast<uint64_t>(x->src);
            x->done = x->bytes;
            if (x->lazy)
              lazyAcks_.emplace_back(*x, head);  // drain() waits for it
            else
              lanes.acks.emplace_back(x, head);
          } else {
            size_t len = std::min(slotBytes_, x->bytes - x->done);
            sh->len = len;
            sh->flags = 0;
            copyBytes(slot + sizeof(SlotHeader), static_cast<const uint8_t*>(x->src) + x->done, len);
            x->done += len;
          }
          ++head;
          pushed = true;
          if (x->done == x->bytes) lanes.send.pop_front();
        }
        if (pushed) {
          r->head.store(head, std::memory_order_release);
          ring(peer);
          progress = true;
        }
        while (!lanes.acks.empty() && lanes.acks.front().second < tail) lanes.acks.pop_front();
        if (!lanes.send.empty())
          waiting = lanes.send.front();
        else if (!lanes.acks.empty())
          waiting = lanes.acks.front().first;
      }
      if (!lanes.recv.empty()) {
        ShmRing* r = ringFrom(peer);
        uint64_t tail = r->tail.load(std::memory_order_relaxed);
        uint64_t head = r->head.load(std::memory_order_acquire);
        bool popped = false;
        while (!lanes.recv.empty() && tail < head) {
          Xfer* x = lanes.recv.front();
          uint8_t* slot = reinterpret_cast<uint8_t*>(r) + kRingHeader + (tail % slots_) * stride;
          const auto* sh = reinterpret_cast<const SlotHeader*>(slot);
          MsgTag got = sh->tag;
          uint64_t off = sh->offset, len = sh->len;
          if (!got.sameCall(x->tag) || got.bytes != x->bytes) throwMismatch("shm", ctx_.rank, *x, got);
          bool single = sh->flags == kCma;
          if (off != x->done || len > x->bytes - x->done || (single ? (!cma_ || len != x->bytes) : len > slotBytes_))
            throwError(hetcclRemoteError,
                       "shm: corrupt slot from rank " + std::to_string(peer) + " in " + x->tag.describe());
          const uint8_t* data = slot + sizeof(SlotHeader);
          uint8_t* dst = static_cast<uint8_t*>(x->dst) + x->done;
          if (len == 0) {
            // empty message: nothing to copy (buffers may be null)
          } else if (single) {
            cmaRead(*x, sh->cmaAddr);
          } else if (x->kind == Xfer::Kind::kRecv) {
            copyBytes(dst, data, len);
          } else {
            size_t es = dataTypeSize(x->dtype);
            if (len % es != 0) throwError(hetcclRemoteError, "shm: slot splits an element");
            reduceArrays(dst, x->operand(x->done), data, len / es, x->dtype, x->redKind);
          }
          x->done += len;
          ++tail;
          popped = true;
          if (x->done == x->bytes) lanes.recv.pop_front();
        }
        if (popped) {
          r->tail.store(tail, std::memory_order_release);
          ring(peer);
          progress = true;
        }
        if (!lanes.recv.empty()) waiting = lanes.recv.front();
      }
    }
    if (!waiting) return;
    if (progress) {
      watch.madeProgress();
      spinStart = std::chrono::steady_clock::now();
      continue;
    }
    checkNotPoisoned(waiting);  // a peer's own failure names the cause better than our timeout
    watch.check(*waiting);
    auto spun = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - spinStart);
    if (spun.count() < spinUs_) {
      // With more ranks than cores, hand the core to a peer that may be
      // about to produce what this rank waits for.
      if (oversubscribed_) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
      else
        __builtin_ia32_pause();
#endif
      continue;
    }
    me->sleeping.store(1, std::memory_order_seq_cst);
    if (me->doorbell.load(std::memory_order_seq_cst) == bell) {
      futexWait(&me->doorbell, bell, 100);
      if (me->doorbell.load(std::memory_order_acquire) == bell) checkPeersAlive(*waiting);
    }
    me->sleeping.store(0, std::memory_order_relaxed);
  }
}

}  // namespace hetccl
