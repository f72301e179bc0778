// Send/recv channels of GPU ranks of different groups on different hosts
// (border/pair_links.h has those of one host). Each end keeps its own half
// of a channel in its own pinned memory, registered with its GPU runtime:
// an outbox (the parts this rank's stream puts there for the peer) and an
// inbox (the parts its stream copies out), each of PairChannel::kSlots
// parts with a ready and an ack flag per slot. The enqueue, release and
// watch code of the on-host channels (gpu/border_p2p.cc) runs
// on them unchanged: a sender's stream waits for outAck, a receiver's for
// inReady, as on one host. One relay thread per rank carries the parts
// from outboxes to the peers' inboxes over a transport of its own of the
// communicator's inter-host kind, and stores the flags the streams wait on.
//
// The relay goes in rounds, each a status message exchanged with every
// remote peer, then the parts both ends agreed on. A status tells, per
// direction: how many parts of its outbox this rank's stream has filled
// (with their lengths, from the enqueuing thread's announce()), and up to
// which part its inbox has room for parts that a receive posted on this
// rank awaits (its stream acknowledged the part kSlots before, and the
// lengths of those receives). Parts sent+1 .. min(ready, room) then move in
// the round's second exchange, which both ends compute alike from the two
// statuses, so every transfer is matched and none waits on a stream: the
// relay never blocks on one channel while another could go on (no
// head-of-line wait, so the on-host rule of ascending peer order is all
// that keeps a group call of long sends free of cycles here too). After
// the exchange the sender stores its outAck (the part left its outbox) and
// the receiver its inReady (the part is in its inbox).
//
// A send and its receive of different sizes fail at the first part that
// differs, on both ends, naming both sizes. While a rank has announced
// parts not yet moved it goes round after round (after kBusyRounds rounds
// that moved nothing, with waits of up to kPendingUs: the streams' flags
// are polled), and so does it while a peer's status says that the peer
// moved parts in its last round (with anyone: every round waits for every
// peer's status, so an idle peer must not hold a busy one up); while it
// and its peers have none it waits up to kIdleUs between rounds (an
// announcement wakes it at once), so a peer whose relay is idle answers a
// round within that: the price of a relay that needs no unexpected
// message is a status a millisecond per remote peer while the
// communicator idles.
//
// Channels are made at a pair's first use by the enqueuing thread, before
// anything of that group call is enqueued, while a stream of an earlier
// call may still wait on a peer or on this relay: registering host memory
// does not wait for the device on CUDA (tests/gpu/test_kernels.cc
// Runtime.RegisterHostWhileAStreamWaitsOnThisThread; HIP not yet tried),
// unregistering does, which is why the end waits for the streams. Memory
// per used peer: 2 x kSlots parts of min(HETCCL_GPU_BORDER_CHUNK,
// PairLinks::kMaxPart).
//
// Failure: a transport error, a round that finds a peer's status wrong, a
// released flag: the relay stops and poisons its transport (the peers'
// relays fail naming this rank); with parts in flight the communicator
// fails (its asynchronous error set, then its streams released), else the next
// send/recv across hosts fails naming why; error() says why. halt()
// (abort, a failed call) does the same from outside. stop() (the communicator's end) serves what is
// announced for up to 5 s, then says goodbye in a last round, so the
// peers' relays drop this rank instead of failing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "border/pair_links.h"
#include "transport/transport.h"

namespace hetccl {

class CallMetrics;
class DeviceRuntime;

class PairRelay {
 public:
  // Collective over every rank of ctx.bootstrap (one transport named
  // `transport`): every rank calls it, those without remote pair peers with
  // `peers` empty (then no thread runs). peers: global ranks, ascending.
  // failed: called by the relay thread when it fails with parts in
  // flight, outside stop() (it fails the communicator, then releases the
  // streams: a part announced will never move), before the relay releases
  // its own flags.
  using Failed = std::function<void(hetcclResult_t, const std::string&)>;
  static std::unique_ptr<PairRelay> create(DeviceRuntime& d, const std::string& transport, TransportContext ctx,
                                           std::vector<int> peers, size_t partBytes, CallMetrics* metrics,
                                           Failed failed);
  static constexpr double kIdleUs = 1000;
  // Rounds that move nothing go on back to back this many times, then with
  // waits that double up to kPendingUs while parts are announced.
  static constexpr int kBusyRounds = 32;
  static constexpr double kPendingUs = 100;
  ~PairRelay();
  PairRelay(const PairRelay&) = delete;
  PairRelay& operator=(const PairRelay&) = delete;

  const std::vector<int>& peers() const { return peers_; }
  // The channel with `peer` (made here at its first use), or null where
  // `peer` is not a remote pair peer. The enqueuing thread.
  PairChannel* channel(int peer);
  // Whether ch is one of this relay's channels (not an on-host one).
  bool owns(const PairChannel& ch) const;
  // The next part of `ch` this rank sends (else: receives) is `len` bytes
  // of a send (receive) of `msg` bytes. The enqueuing thread, once per
  // part, in the parts' order; nothing where !owns(ch).
  void announce(const PairChannel& ch, bool send, size_t len, size_t msg);
  // Every flag this rank's streams wait on for the relay: released.
  void releaseFlags();
  // Stops the thread and poisons the transport. Any thread; idempotent.
  void halt(const std::string& why);
  // The communicator's end (the destructor): see above.
  void stop();
  std::string error() const;

  // One end's view of one direction of a channel, as a status carries it.
  struct Side {
    uint64_t upTo = 0;  // ready: parts filled; room: parts the inbox takes
    // Of parts base+1 .. upTo (base: moved so far): each part's length and
    // the length of the send or receive it belongs to.
    uint32_t lens[PairChannel::kSlots] = {};
    uint64_t msgs[PairChannel::kSlots] = {};
  };
  struct Status {
    uint64_t round = 0;
    uint32_t bye = 0;   // the last round of the sender's relay
    uint32_t busy = 0;  // kMoved: it moved parts in its last round; kWaiting: parts of it wait
    Side out, in;       // the sender's outbox to the receiver, its inbox from it
  };
  // The parts that move in one direction of a round: base+1 .. the
  // returned count, checked against both ends' lengths; throws naming both
  // sizes (and `what`: who sends to whom) where a part's lengths differ.
  static uint64_t agree(uint64_t base, const Side& ready, const Side& room, const std::string& what);

 private:
  struct Link;
  PairRelay(DeviceRuntime& d, std::vector<int> peers, size_t partBytes, double timeoutS);
  void loop();
  // Throws where no part of link l can move any more: the relay ended or
  // was stopped, or the peer left (under mu_).
  void usable(const Link& l) const;
  // Every flag of l's channel that this rank's streams wait on: released.
  void releaseChannel(Link& l);
  // This rank's status for one link (under mu_).
  Status statusOf(Link& l, uint64_t round);
  // Runs x on the transport; its errors say they are the relay's.
  void move(std::vector<Xfer>& x);
  // One round with the links not gone: whether any part moved, and whether
  // a peer moved parts (with anyone) in its last round or has parts waiting.
  struct Round {
    bool moved = false, peerMoved = false, peerWaiting = false;
  };
  static constexpr uint32_t kMoved = 1, kWaiting = 2;
  Round round(uint64_t n, bool bye);
  bool pending() const;  // under mu_
  void failed(hetcclResult_t code, const std::string& why);

  DeviceRuntime& d_;
  std::vector<int> peers_;
  size_t partBytes_;
  double timeoutS_;
  CallMetrics* metrics_ = nullptr;
  Failed onFailure_;
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Link>> links_;  // by position in peers_
  std::atomic<bool> stop_{false}, leaving_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string error_;
  uint64_t announced_ = 0;  // parts announced so far (wakes the thread)
  bool movedLast_ = false;  // the relay thread's last round moved parts
  std::thread thread_;
};

}  // namespace hetccl
