// Send/recv channels of GPU ranks through shared memory on one host
// (gpu/border_p2p.h moves the data). A PairChannel is both
// directions between this rank and one peer: each direction has kSlots
// parts of the sender's memory with a ready flag (the sender's stream
// stored it after filling the part: the n-th part is in slot n % kSlots)
// and an ack flag (the reader's stream stored it after copying the part
// out), counted per direction, never by the collective sequence.
//
// Border peers (the same index in two groups, border/device_border.h) have
// their channels in their border segments. PairLinks makes those of every
// other two GPU ranks of different groups on one host (another index in
// their groups, or an index a smaller group lacks): one more shared-memory
// segment per rank that has such peers, holding a channel to each of them,
// mapped by those peers and registered with each one's GPU runtime, all at
// init (registration may synchronise the device). Memory: kSlots parts of
// at most kMaxPart bytes per linked peer and rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hetccl {

class DeviceRuntime;

// The sizes each end of a channel on one host gave its messages: each end
// logs its sends to and its receives from the peer (message number, bytes)
// in its own shared memory, in rings of kMsgs, and before it enqueues a
// message compares it with the peer's entry of the same number on the
// other side (gpu/border_p2p.cc): of a send and a receive of
// different sizes, the second end to enqueue finds the mismatch and fails
// before it enqueues anything. Both ends write first and read second, sequentially consistent,
// so of two enqueues at once at least one sees the other's entry. A
// message the peer's log no longer holds (it ran more than kMsgs messages
// ahead) goes unchecked. Across hosts the pair relay checks every part.
struct PairLog {
  static constexpr int kMsgs = 16;
  struct Entry {
    uint64_t msg;  // 1-based message number; 0 while being written
    uint64_t bytes;
  };
  Entry sends[kMsgs];  // this end's sends to the peer
  Entry recvs[kMsgs];  // this end's receives from the peer
};
// Logs message `msg` (a send where `send`, else a receive) of `bytes` in
// `own`, then returns the bytes `peer` gives the same message on the other
// side (its receive, or its send), or nothing where it has no entry of it.
std::optional<uint64_t> pairLogCheck(PairLog* own, const PairLog* peer, bool send, uint64_t msg, uint64_t bytes);

struct PairChannel {
  static constexpr int kSlots = 4;
  int peer = -1;  // global rank
  size_t partBytes = 0;
  volatile uint64_t* outReady[kSlots] = {};  // this rank to the peer: in this rank's memory
  volatile uint64_t* outAck[kSlots] = {};
  uint8_t* outData[kSlots] = {};
  volatile uint64_t* inReady[kSlots] = {};  // the peer to this rank: in the peer's memory
  volatile uint64_t* inAck[kSlots] = {};
  uint8_t* inData[kSlots] = {};
  uint64_t sent = 0, received = 0;  // parts so far, each direction (the enqueuing thread)
  int relayLink = -1;               // across hosts: its link in the pair relay (border/pair_relay.h)
  // On one host: this rank's log for the peer and the peer's for this rank
  // (null across hosts), and the messages so far each direction.
  PairLog* ownLog = nullptr;
  const PairLog* peerLog = nullptr;
  uint64_t sentMsgs = 0, receivedMsgs = 0;
};

class PairLinks {
 public:
  static constexpr size_t kMaxPart = size_t{2} << 20;
  // The peers of rank r that need a link: on r's host (hostOf empty: one
  // host), in another group, not its border peer (the same index in both
  // groups, below `shares`, the smallest group's size); ascending.
  static std::vector<int> linksOf(int r, const std::vector<int>& groupOf, const std::vector<int>& groupRank, int shares,
                                  const std::vector<int>& hostOf);
  // Shared memory of a rank with n links, parts of `part` bytes.
  static size_t segmentBytes(size_t n, size_t part);

  // Rank `rank` of a job whose link lists are linksOf(r, ...) for every r.
  PairLinks(int rank, std::vector<std::vector<int>> linksByRank, size_t part);
  ~PairLinks();
  PairLinks(const PairLinks&) = delete;
  PairLinks& operator=(const PairLinks&) = delete;

  bool empty() const { return mine().empty(); }
  size_t bytes() const { return segmentBytes(mine().size(), part_); }
  // Init, collective with the linked peers: make this rank's segment
  // (before a barrier), map every linked peer's (after it; nameOf gives a
  // rank's segment name), unlink the name (after a second barrier), and
  // register every segment with the GPU runtime.
  void create(const std::string& name);
  void mapPeers(const std::function<std::string(int)>& nameOf);
  void unlinkOwn();
  void registerWith(DeviceRuntime& d);
  // One channel per linked peer (after mapPeers).
  std::vector<PairChannel> channels();

 private:
  const std::vector<int>& mine() const { return links_[rank_]; }
  volatile uint64_t* flag(uint8_t* seg, size_t reader, int slot, int which) const;

  int rank_;
  std::vector<std::vector<int>> links_;
  size_t part_;
  std::string name_;
  uint8_t* own_ = nullptr;
  std::vector<uint8_t*> peers_;  // by position in mine()
  std::vector<uint8_t*> registered_;
  DeviceRuntime* dev_ = nullptr;
};

}  // namespace hetccl
