// What every collective over the device border (border/device_border.h)
// shares: the flag protocol of one slot use, the fold in one order on every
// rank, the fork and join of the internal streams, and the watcher's watch of
// the call. The collectives themselves: device_border_allreduce.cc,
// device_border_coll.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/comm.h"

namespace hetccl {

// Calls from this size on (their largest buffer) time their border work
// with timed events, where metrics, a trace or the flight recorder read
// them: the events cost the GPU several microseconds a call, more than half
// of a small call under MPS, and a few percent from here on (docs/design-gpu.md).
// Of the smaller calls about one in kTimedSampleEvery is timed, at random
// gaps (SmallCallSampler::sample), and the metrics count its time as
// many times as the gap that ended at it: the border's and the group's
// time of small calls, estimated at a sixty-fourth of the cost.
constexpr size_t kTimedMinBytes = size_t{1} << 20;
constexpr uint64_t kTimedSampleEvery = 64;

struct BorderCall {
  // `callBytes`: the call's largest buffer, whether it is timed.
  BorderCall(Comm& owner, DataType type, RedKind k, size_t callBytes);
  // Gives back the events that no watch() took (a call that threw before
  // its watch), and commits the slot uses taken (DeviceBorder::commit).
  ~BorderCall();
  BorderCall(const BorderCall&) = delete;
  BorderCall& operator=(const BorderCall&) = delete;

  Comm& comm;
  DeviceBorder& border;
  DeviceRuntime& dev;
  const hetcclKernelsApi_t& kernels;
  DataType dt;
  RedKind kind;
  size_t elemBytes;
  std::vector<Event> events;  // given back when the call is over
  // Per border peer, the last sequence whose ready / done flag this call's
  // streams waited on through readFromPeer() (0: none): whom a timeout names.
  std::vector<uint64_t> readReady, readDone;
  // The border's first and last work on the caller's stream (timed events;
  // watch() hands them to the watcher, which counts the time between them).
  Event timedStart = nullptr, timedEnd = nullptr;
  // The call's start on the caller's stream, before its first work (a
  // timed event; startCall): in a group of several GPUs the vendor
  // library's group steps run on the device with no host step to time, so
  // watch() records the call's end too and the watcher counts the call's
  // device time less its border time as group time.
  Event callStart = nullptr, callEnd = nullptr;
  // Whether the call is timed (kTimedMinBytes or sampled; metrics, a trace
  // or the flight recorder on): markStart() and startCall() record timed
  // events. weight: the calls its time stands for in the metrics (1, or a
  // sampled small call's gap).
  bool timed = false;
  double weight = 1;
  size_t sent = 0;  // bytes this rank stored for the other groups (watch() counts them)

  int peers() const { return border.peers(); }
  int me() const { return border.me(); }
  // The global rank of the border peer of group g with this rank's index
  // `i` in its group (or another index).
  int rankOf(int g) const { return border.peerRank(g); }
  // Where peer g's part lies in device scratch (g != me).
  uint8_t* scratchOf(int g) { return border.scratch(g < me() ? g : g - 1); }

  // A copy into this rank's border area (bytes leaving for the other groups).
  void put(void* dst, const void* src, size_t n, Stream s) {
    sent += n;
    dev.copy(dst, src, n, s);
  }
  // On stream st: waits until border peer q stored its ready flag (results:
  // its done flag) of `slot` for `seq`, then copies n bytes from `from` (in
  // q's segment) to `to`. A peer on another host: the relay brings them
  // into its mirror first.
  void readFromPeer(Stream st, int q, uint64_t seq, int slot, bool results, void* to, const void* from, size_t n) {
    std::vector<uint64_t>& read = results ? readDone : readReady;
    if (read.empty()) read.assign(peers(), 0);
    read[q] = std::max(read[q], seq);
    border.announceRead(q, seq, results, from, n);
    dev.streamWaitValue(st, results ? border.done(q, slot) : border.ready(q, slot), seq);
    dev.copy(to, from, n, st);
  }
  // Throws naming the kernel and the plugin's text on a nonzero return.
  void check(int rc, const char* what);
  // dst[0, n) = src[0, n) x scalar (a PreMulSum's inputs), on stream st.
  void scale(uint8_t* dst, const uint8_t* src, size_t n, double scalar, Stream st) {
    check(kernels.scale(dst, src, n, static_cast<int>(dt), scalar, st), "scale");
  }
  // An event recorded on s now (from the pool; back when the call is over).
  Event event(Stream s);
  // Before the border's first work on `caller` (fork() does it; paths
  // without one call it), and after its last (join(); else watch()): timed
  // events, so that the watcher counts the border step's time on the device.
  void markStart(Stream caller);
  void markEnd(Stream caller);
  // A timed event recorded on `caller` now where the call is timed and this
  // rank's group has several GPUs (else null): for callStart.
  Event startCall(Stream caller);
  // out[0, n) = v(0) op v(1) op ... op v(G-1), left to right on every rank
  // (the same bits everywhere), where v(me) = mine and v(g) = scratchOf(g).
  // mine may be out: the running value then stays in scratch until the last
  // step, so mine is read intact.
  void fold(uint8_t* out, const uint8_t* mine, size_t n, Stream s);
  // Before this rank fills slot `slot` for `seq`: every reader is done with
  // the slot's use for seq - kSlots.
  void waitSlotFree(uint64_t seq, int slot, Stream s);
  // After this rank's last read of `slot` for `seq`: tells every other peer
  // (also those whose slot it did not read: their next use waits for it).
  void ackReads(uint64_t seq, int slot, Stream s);
  // A slot use: the next sequence number and its slot.
  uint64_t take(int* slot);

  // One slot use in which every peer sends part p to peer p: on the out
  // stream this rank's parts (from(p), len bytes, p != me) go to its slot,
  // on the in stream every peer's part for this rank comes to to(q), then
  // the reads are acknowledged. afterOwn: the in stream first waits until
  // this rank's own parts are out (in place, it writes over them).
  template <typename From, typename To>
  void swapParts(size_t len, From from, To to, bool afterOwn = false) {
    int slot = 0;
    const uint64_t seq = take(&slot);
    Stream o = border.outStream(), in = border.inStream();
    waitSlotFree(seq, slot, o);
    for (int p = 0; p < peers(); ++p)
      if (p != me()) put(border.out(me(), slot, p), from(p), len, o);
    dev.streamWriteValue(o, border.ready(me(), slot), seq);
    if (afterOwn) dev.streamWaitValue(in, border.ready(me(), slot), seq);
    for (int q = 0; q < peers(); ++q) {
      if (q == me()) continue;
      readFromPeer(in, q, seq, slot, false, to(q), border.out(q, slot, me()), len);
    }
    ackReads(seq, slot, in);
  }

  // The internal streams start after the caller's work so far ...
  void fork(Stream caller);
  // ... and the caller's later work waits for both.
  void join(Stream caller);
  // Records the call's end on `caller` and has the watcher watch it (bounded
  // by HETCCL_TIMEOUT_S and the abort flag): on a timeout every stream wait
  // is released and the communicator fails naming the border peer that did
  // not come. `writer`: the one peer whose stores this rank waits for, or
  // -1 for all; `results`: it waits for their result stores too.
  void watch(Stream caller, const char* what, size_t bytes, uint64_t firstSeq, int writer, bool results);
  // The same where behind(&poisoned) says which rank (global) this rank
  // still waits for (or -1) and whether a peer released its flags.
  void watch(Stream caller, const char* what, size_t bytes, std::function<int(bool*)> behind);
};

}  // namespace hetccl
