// The device border's reach across hosts (border/device_border.h). A border
// peer on another host cannot map this rank's segment, so this rank keeps a
// mirror of that peer's segment (its own memory, registered with its GPU
// runtime like the segments of peers on this host) and three threads of
// the relay carry, each over a transport of its own of the communicator's
// inter-host kind, what the streams on either side read from the other.
// The streams, the flags and the collectives stay as they are on one host:
// a stream that waits on a remote peer's flag waits on the mirror's, and
// the relay stores it once the data it guards is in the mirror.
//
// - The parts thread, one slot use (border sequence number) after another:
//   the ranges of a remote peer's segment that this rank's streams will
//   read in that use (recorded while the calls are enqueued: announceRead()) go to
//   that peer, and its requests come here; once this rank's stream stored
//   its own ready flag of the use, each remote peer gets the ranges it
//   asked for after that flag, and what this rank asked for lands in its
//   mirrors, whose ready flags the thread then stores.
// - The results thread does the same for the done flags (AllReduce's
//   reduced parts), one use behind the parts thread, so that the next use's
//   parts cross while this one's are folded.
// - The ack thread: once this rank's streams acknowledged a slot use in a
//   remote peer's mirror (ackReads), the ack goes to that peer, whose
//   thread stores it in its own segment, where its streams wait for it
//   before they fill the slot again.
// Each goes through the slot uses in order and only after the enqueuing
// thread committed them (after each use's last read is enqueued), so every
// rank's relay meets its peers' in the same order. They are apart because a use's data
// may wait, in stream order, for another flag of an earlier use (results,
// acks: the writer's slot must be free), and each thread waits on the CPU
// for the flag its next transfer needs.
//
// Failure: a relay thread that fails (a peer closed, a timeout, a request
// outside the segment) releases every stream of this rank (releaseAll) and
// poisons its transports, so the remote peers' relays fail too; error()
// names what went wrong for the call's watch. halt() (abort, a failed
// call) stops the threads and tells the remote peers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.h"

namespace hetccl {

class CallMetrics;
class DeviceBorder;

class BorderRelay {
 public:
  static constexpr int kMaxRanges = 4;  // per slot use, flag and remote peer

  // Collective over every rank of ctx.bootstrap (two transports named
  // `transport`): every rank calls it, those without remote peers with
  // `remote` empty (then no thread runs). remote: the border peer indices
  // (DeviceBorder::peerRank) on other hosts.
  // metrics: where the bytes sent to remote peers are counted (link
  // border_remote), or null.
  static std::unique_ptr<BorderRelay> create(DeviceBorder& b, const std::string& transport, TransportContext ctx,
                                             std::vector<int> remote, CallMetrics* metrics);
  ~BorderRelay();
  BorderRelay(const BorderRelay&) = delete;
  BorderRelay& operator=(const BorderRelay&) = delete;

  // This rank's streams read bytes [off, off + len) of remote peer q's
  // segment in slot use `seq`, after its ready flag (results: its done
  // flag); len may be 0 (the flag alone). The enqueuing thread.
  void announceRead(int q, uint64_t seq, bool results, size_t off, size_t len);
  // Every slot use up to `seq` is enqueued: the threads may serve them.
  void commit(uint64_t seq);
  // Stops the threads and poisons the transports (the remote peers' relays
  // fail naming this rank). Any thread; idempotent.
  void halt(const std::string& why);
  // Waits a while (5 s) for the threads to serve what was committed, then
  // stops and joins them (the destructor; DeviceBorder calls it first, so
  // that a thread failing meanwhile still finds its relay).
  void stop();
  // What made a relay thread fail ("": nothing). Any thread.
  std::string error() const;

  struct Range {
    uint64_t off, len;
  };
  // What this rank asks a remote peer for in one slot use (a wire format).
  struct Request {
    uint64_t seq = 0;
    uint32_t count[2] = {0, 0};  // ranges after ready, after done
    uint32_t flags = 0;          // bit w: the flag (0 ready, 1 done) is waited on
    uint32_t pad = 0;
    Range ranges[2][kMaxRanges] = {};
  };
  // Adds a read to a request (joined to one it goes on from; a range read
  // again is not added twice); throws past kMaxRanges.
  static void addRange(Request& r, bool results, size_t off, size_t len);
  // Why a peer's request for slot use `seq` may not be served ("" where it
  // may): another slot use, too many ranges, data without its flag, bytes
  // outside [lo, hi) (this rank's border data in its segment).
  static std::string requestError(const Request& r, uint64_t seq, uint64_t lo, uint64_t hi);

 private:
  enum Msg : uint8_t { kRequest = 0, kReady = 1, kDone = 2, kAck = 3 };

  BorderRelay(DeviceBorder& b, std::vector<int> remote, double timeoutS);
  // The relay's threads, each with a transport of its own.
  enum Work { kParts = 0, kResults = 1, kAcks = 2, kWorks = 3 };
  // A slot use's requests once the parts thread swapped them, for the
  // results thread (only uses where results are asked for).
  struct Swapped {
    std::vector<Request> mine, theirs;
  };
  void loop(Work w);
  void serveParts(uint64_t seq);
  // The data of one flag (w: 0 ready, 1 done) of slot use `seq`.
  void move(uint64_t seq, int w, const std::vector<Request>& mine, const std::vector<Request>& theirs);
  void serveAcks(uint64_t seq);
  // The parts thread, while it waits for a commit: throws where the
  // enqueuing thread has been stuck inside a call (DeviceBorder::Enqueuing).
  void checkEnqueuing() const;
  // Waits until *f holds `seq` or more (stored by this rank's streams).
  void waitStored(volatile uint64_t* f, uint64_t seq, const char* what);
  void check(const Request& r, int q, uint64_t seq) const;
  MsgTag tag(uint64_t seq, Msg m) const;
  void failed(const std::string& why);

  DeviceBorder& b_;
  std::vector<int> remote_;  // peer indices
  CallMetrics* metrics_ = nullptr;
  double timeoutS_;
  std::unique_ptr<Transport> transports_[kWorks];
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t committed_ = 0;
  std::map<uint64_t, std::vector<Request>> wants_;  // by slot use, then index in remote_
  std::map<uint64_t, Swapped> swapped_;
  uint64_t swappedUpTo_ = 0;
  uint64_t served_[kWorks] = {};  // each thread is done with every slot use up to it
  std::string error_;
  std::thread threads_[kWorks];
};

}  // namespace hetccl
