// The device border: what GPU ranks of several groups on one host share to
// move the border share of a collective with their GPUs' own copy engines,
// without a CPU copy or a CPU fold (gpu/border_allreduce.h runs
// the collectives over it).
//
// Border peers are the ranks with the same index in every group (every
// group holds GPU ranks, of any vendor). Where the groups differ in size,
// the indices below the smallest group's size m have border peers; ranks
// of index m and above (in larger groups) hold a border without peers: no
// segment of their own but a header, no streams, one part of device
// scratch (ownStaging()); they take part in the group steps of the calls
// that take the border (all of them).
// Each
// border peer owns one shared-memory segment, mapped by every other border
// peer and registered with each one's GPU runtime (cudaHostRegister,
// hipHostRegister: one segment serves an NVIDIA and an AMD process alike).
// A segment holds `slots` slots, each an out area (one part per peer) and a
// result area (one part), and the flags of each slot:
//   ready[slot]        the owner's stream stored it after filling the out area
//   done[slot]         ... after filling the result area
//   ack[reader][slot]  a reader's stream stored it after its last read of
//                      the slot, so the owner may fill it again
// Send/recv between two border peers goes through a pair channel of its
// own in the sender's segment (kSlots parts for each reader) with its own
// flags, counted per direction: pairReady[reader][slot] (the n-th part the
// owner sent that reader is in slot n % kSlots) and pairAck[reader][slot]
// (the reader's stream copied it in). Pair traffic so never takes a
// collective sequence number: the other peers need not take part, and the
// two directions go on independently. Two GPU ranks of different groups
// on one host that are not border peers have the same channels in
// segments of their own (border/pair_links.h); pair() gives either kind.
// Every flag holds the border sequence number of the slot's last use and
// only grows; streams wait for ">= sequence" (stream memory operations:
// cuStreamWaitValue64 / WriteValue64). Every wait a stream makes is for a
// store that another stream has already been given, so nothing the GPUs
// wait on depends on a CPU thread; the CPU only watches (bounded by
// HETCCL_TIMEOUT_S and the abort flag) and, to release the streams, stores
// kFlagReleased (device/device.h) to every flag they may wait on.
//
// Border peers on other hosts (border/border_relay.h): this rank keeps a
// mirror of each one's segment (its own memory, laid out alike and
// registered alike), which the relay's threads fill with what this rank's
// streams read and whose flags they store; the collectives do not change.
// Each read of a peer's segment is announced first (announceRead()) and each call
// commits its slot uses (commit()), so the relay knows what to fetch.
//
// Everything here is made at init: the segments, their registration (which
// may synchronise the device), two internal streams and the device scratch.
// Memory: slots x (2 x peers) x HETCCL_GPU_BORDER_CHUNK bytes of shared
// memory per rank, 2 x (peers - 1) x HETCCL_GPU_BORDER_CHUNK bytes of
// device scratch (a rank without peers: one part); fixed, whatever the
// message size.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "border/border_relay.h"
#include "border/pair_links.h"
#include "border/pair_relay.h"
#include "device/device.h"

namespace hetccl {

class Bootstrap;
class CallMetrics;

class DeviceBorder {
 public:
  static constexpr int kSlots = 4;  // 2 are needed for the pipeline to go on; 4 let it run ahead

  struct Setup {
    Bootstrap* bootstrap = nullptr;
    DeviceRuntime* device = nullptr;
    int rank = 0;                      // global rank
    std::vector<int> peerRanks;        // global rank of every border peer, by group index
    int me = 0;                        // this rank's index in peerRanks
    size_t partBytes = 0;              // HETCCL_GPU_BORDER_CHUNK: the most; less where /dev/shm is short
    size_t minBytes = 0;               // HETCCL_GPU_BORDER_MIN
    int ranksOnHost = 1;               // whose segments share this host's /dev/shm
    int shares = 1;                    // the smallest group's size: indices with border peers
    bool minIsSet = false;             // HETCCL_GPU_BORDER_MIN was given (else: see minBytes())
    std::string roundKernel = "auto";  // HETCCL_GPU_BORDER_KERNEL: auto, 0 or 1
    bool canRound = false;             // the kernels plugin has borderRound
    DeviceRuntime::Priority priority = DeviceRuntime::Priority::kHighest;  // of the internal streams
    // Flags of this rank's other streams' waits (the staged calls' and the
    // launch stream's, device/staging.h): releaseAll() releases them too,
    // so that a release by the relay ends every wait of this rank.
    std::vector<volatile uint64_t*> releaseToo;
    std::vector<int> hostOf;   // host index of every global rank (empty: all on one)
    std::vector<int> groupOf;  // group and rank in it of every global rank: the pair links
    std::vector<int> groupRank;
    // Where ranks span hosts: every rank makes the relay (collective), over
    // this transport with this context (the communicator's, for its peers).
    std::string relayTransport;
    const TransportContext* relayContext = nullptr;
    CallMetrics* metrics = nullptr;  // the relay counts the bytes it sends (border_remote)
    // The send/recv relay failed with parts in flight (the communicator
    // fails: border/pair_relay.h); called after this rank's streams are released.
    PairRelay::Failed relayFailed;
  };
  // Collective over every rank of the communicator (one bootstrap allgather
  // and two barriers): every rank calls it, with its own border peers. The
  // part size is the smallest any rank can afford: every rank's segment
  // must fit in half of what /dev/shm has free (ranks x segment), and it is
  // never below 64 KiB (then there is no border: null, and the calls stage).
  static std::unique_ptr<DeviceBorder> create(const Setup& s);
  // Whether two ranks run on one physical GPU (gpu[r], 0: not known) that
  // time-slices them: not both of them under MPS (mps[r]).
  static bool timeSlicedGpus(const std::vector<uint64_t>& gpu, const std::vector<bool>& mps);
  ~DeviceBorder();
  DeviceBorder(const DeviceBorder&) = delete;
  DeviceBorder& operator=(const DeviceBorder&) = delete;

  int peers() const { return static_cast<int>(peerRanks_.size()); }
  // False on a rank of index `shares()` or above (see above).
  bool hasPeers() const { return peers() > 1; }
  int shares() const { return shares_; }
  int me() const { return me_; }
  int peerRank(int g) const { return peerRanks_[g]; }
  size_t partBytes() const { return partBytes_; }
  // The smallest call that takes the border: HETCCL_GPU_BORDER_MIN where
  // set, else 0, or its default where two ranks of the job share a GPU that
  // time-slices their contexts (timeSliced()).
  size_t minBytes() const { return minBytes_; }
  // Two GPU ranks of this job run on one GPU without MPS (the same on every
  // rank): every hand-off between their streams waits out a time slice.
  bool timeSliced() const { return timeSliced_; }
  // Small AllReduce rounds run as one kernel (borderRound of the kernels
  // plugin) that copies, stores and waits for the flags and folds, instead
  // of a chain of copies and stream memory operations: HETCCL_GPU_BORDER_KERNEL
  // 1, or auto where the GPUs do not time-slice (a kernel waiting for
  // another context's stores would hold the GPU until its slice ends).
  bool roundKernel() const { return round_; }
  // Where this rank's kernels reach `host`, an address in owner's segment.
  template <typename T>
  T* onDevice(int owner, T* host) const {
    auto* h = reinterpret_cast<uint8_t*>(const_cast<std::remove_cv_t<T>*>(host));
    return reinterpret_cast<T*>(devSeg_[owner] + (h - seg_[owner]));
  }
  size_t segmentBytes() const { return segBytes_; }
  // Where border peer q's segment (or its mirror) is mapped here, and where
  // its data (slots and pair channels) begins.
  uint8_t* segment(int q) const { return seg_[q]; }
  size_t dataOffset() const { return flagBytes_; }
  // Border peer q is on another host: its segment here is a mirror.
  bool remote(int q) const { return remote_[q]; }
  // This rank's streams read n bytes at `at` (in peer q's segment) in slot
  // use `seq` after its ready flag (results: done): the relay brings them
  // where q is remote. The enqueuing thread.
  void announceRead(int q, uint64_t seq, bool results, const void* at, size_t n);
  // Every slot use up to `seq` (0: taken so far) is enqueued, its reads
  // announced: the relay may serve it. After each use's last read
  // (ackReads) and at the end of each call.
  void commit(uint64_t seq = 0);
  // The enqueuing thread is inside a border call for its lifetime. Where
  // ranks span hosts, this rank's streams may by then wait on flags the
  // relay stores only once the thread commits; a GPU runtime call of the
  // thread that waits for the device (a lazy kernel load, an implicit
  // synchronisation) would then never return. The relay's parts thread,
  // waiting for a commit, fails instead once the thread has been inside
  // one for HETCCL_TIMEOUT_S without committing (enqueueStalledUs): it
  // halts the relay and releases this rank's streams, so the stuck call
  // returns and the communicator reports the failure.
  class Enqueuing {
   public:
    explicit Enqueuing(DeviceBorder& b);
    ~Enqueuing();
    Enqueuing(const Enqueuing&) = delete;
    Enqueuing& operator=(const Enqueuing&) = delete;

   private:
    DeviceBorder& b_;
  };
  // Microseconds since the enqueuing thread, inside a border call, began it
  // or last committed; 0 outside one. Any thread.
  double enqueueStalledUs() const;
  // This rank's communicator failed: the relay stops and tells the remote
  // peers, and what it would have stored for this rank's streams is
  // released. Any thread.
  void haltRelay(const std::string& why);
  // What made a relay fail, or "".
  std::string relayError() const;
  // The relays' threads end (serving what was committed and announced for
  // a while first): the communicator's end. Idempotent.
  void stopRelays();
  size_t scratchBytes() const { return scratchBytes_; }

  volatile uint64_t* ready(int owner, int slot) { return flag(owner, slot, 0); }
  volatile uint64_t* done(int owner, int slot) { return flag(owner, slot, 1); }
  volatile uint64_t* ack(int owner, int reader, int slot) { return flag(owner, slot, 2 + reader); }
  // Part p of the owner's out area of `slot`; its result area.
  uint8_t* out(int owner, int slot, int part = 0) { return data(owner, slot) + static_cast<size_t>(part) * partBytes_; }
  uint8_t* result(int owner, int slot) { return data(owner, slot) + static_cast<size_t>(peers()) * partBytes_; }
  // Device scratch: room for one part of every other peer (coming in) ...
  uint8_t* scratch(int i) { return scratch_ + static_cast<size_t>(i) * partBytes_; }
  // ... and one part for every other peer going out (what the group
  // reduced for it, or inputs scaled by a PreMulSum).
  uint8_t* outgoing(int i) { return scratch_ + static_cast<size_t>(peers() - 1 + i) * partBytes_; }
  // One part of device scratch on every rank, with peers or not (with:
  // the first outgoing part): free once a call's border steps are joined.
  uint8_t* ownStaging() { return scratch_ + (hasPeers() ? static_cast<size_t>(peers() - 1) * partBytes_ : 0); }

  // The send/recv channel with global rank `peer`, a GPU rank of another
  // group: on this host a border peer's or a pair link's, on another host
  // the pair relay's (border/pair_relay.h; made here at its first use), or
  // null: such pairs stage (both ends decide alike). The enqueuing thread
  // counts the parts in it, outside any border call (a relay channel's
  // first use maps and registers memory).
  PairChannel* pair(int peer);
  // The channel with `peer` on this host, or null (none, or on another host).
  PairChannel* localPair(int peer);
  // The enqueuing thread put the next part (`len` bytes of a message of
  // `msg`) of `ch` in its stream's way: a relay channel's relay learns of it.
  void announce(const PairChannel& ch, bool send, size_t len, size_t msg);
  // Whether this rank's last pair wait on `ch` (up to part `sent` out, part
  // `received` in) has not been met; `poisoned`: the peer released its
  // flags of the channel. Any thread.
  bool pairBehind(const PairChannel& ch, uint64_t sent, uint64_t received, bool* poisoned) const;

  // Internal streams: copies out (device to host) and copies in plus folds.
  Stream outStream() const { return out_; }
  Stream inStream() const { return in_; }
  // The sequence number of the next slot use (each border peer counts alike).
  uint64_t nextSeq() { return ++seq_; }
  uint64_t seq() const { return seq_; }  // the last one taken

  // The job's failure word on this host (in every rank's segment header):
  // markFailed() tells every rank on this host that this one failed
  // (first one wins; the reason stays in this rank's header) and releases
  // the flags its border peers wait on for it; failedRank()
  // is that rank (its reason in *why) or -1. Any thread. Ranks that meet a
  // failed rank only through the vendor library's group steps (a larger
  // group's ranks without peers; the other indices' peers) learn of it so;
  // ranks on other hosts through the relays, which it halts.
  void markFailed(const std::string& why);
  int failedRank(std::string* why) const;

  // This rank's communicator ends (the border's destruction) or its
  // process exits normally (an atexit handler marks every live border):
  // its header says so, so that the ranks of its host do not take its
  // ended process for a death (Comm::checkHostRanks): it left after its
  // last call. A process killed or crashed marks nothing. Any thread.
  void markLeft();
  // Whether global rank r (of this host) marked it; false where its header
  // is not mapped here.
  bool left(int r) const;

  // Abort and failure: every wait of this rank's streams goes on at once
  // (the other border peers' waits on this rank too). Any thread.
  void releaseAll();
  // A peer whose store of a flag this rank needs for sequence `seq` (ready,
  // and done where `results`) has not come (the lowest such peer index), or
  // -1. `poisoned`: a flag holds the release value: a peer released them.
  // `writer` >= 0: only that peer stores for `seq` (a broadcast's root).
  int behind(uint64_t seq, bool results, bool* poisoned, int writer = -1);
  // The same for the stores a call's streams waited on: ready[q] / done[q]
  // the last sequence whose ready / done flag of peer q they read (0: none).
  int behindReads(const std::vector<uint64_t>& ready, const std::vector<uint64_t>& done, bool* poisoned);

 private:
  DeviceBorder() = default;
  // create()'s steps (device_border_setup.cc), in order.
  struct Agreed {        // what every rank published
    size_t part = 0;     // the smallest part every rank can afford (0: none)
    uint64_t jobId = 0;  // the segments' names
    std::vector<int32_t> pids;
  };
  void layOut();
  size_t segmentBytesFor(size_t part) const;
  size_t partThatFits(const Setup& s, size_t myLinks) const;
  Agreed agree(const Setup& s, size_t part);
  void mapSegments(const Setup& s, const Agreed& a, const std::vector<std::vector<int>>& linkLists, size_t myLinks);
  void startRelays(const Setup& s);
  void registerAndAllocate(const Setup& s, size_t myLinks);
  // Host index of global rank r (0 where every rank is on one host).
  static int hostOf(const Setup& s, int r) { return s.hostOf.empty() ? 0 : s.hostOf[r]; }
  volatile uint64_t* flag(int owner, int slot, int which);
  volatile uint64_t* pairFlag(int owner, int reader, int slot, int which);
  uint8_t* data(int owner, int slot);
  uint8_t* pairData(int owner, int reader, int slot);
  // pairs_: the border peers' channels on this host and the pair links'.
  void makeChannels();
  // In (or out of) the process's live borders, which an exit handler marks left.
  void track(bool on);
  // Whether the internal streams finished what they were given, within
  // `seconds` (polled, no device synchronisation).
  bool streamsIdleWithin(double seconds);

  DeviceRuntime* dev_ = nullptr;
  std::vector<int> peerRanks_;
  int me_ = 0;
  int shares_ = 1;
  size_t minBytes_ = 0;
  bool timeSliced_ = false, round_ = false;
  size_t partBytes_ = 0, flagBytes_ = 0, segBytes_ = 0, scratchBytes_ = 0, pairFlagsAt_ = 0, pairLogsAt_ = 0;
  std::vector<PairChannel> pairs_;  // every send/recv channel of this rank
  std::vector<volatile uint64_t*> releaseToo_;
  std::unique_ptr<PairLinks> links_;   // those with ranks that are not border peers
  std::vector<uint8_t*> seg_;          // by peer index, mapped here
  std::vector<uint8_t*> devSeg_;       // the same segments as this rank's kernels reach them
  std::vector<uint8_t*> headers_;      // every rank's segment header, by global rank
  std::vector<uint8_t*> headerPages_;  // header pages of ranks that are not peers (mapped alone)
  int rank_ = 0;
  std::vector<bool> registered_;
  std::vector<bool> remote_;              // by peer index
  std::atomic<double> progressUs_{0};     // clockUs() of the enqueuing thread's last progress; 0: not enqueuing
  std::unique_ptr<BorderRelay> relay_;    // where a peer is remote (threads: before the segments go)
  std::unique_ptr<PairRelay> pairRelay_;  // where a GPU rank of another group is remote
  uint8_t* scratch_ = nullptr;
  Stream out_ = nullptr, in_ = nullptr;
  uint64_t seq_ = 0;
};

}  // namespace hetccl
