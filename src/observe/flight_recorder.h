// The flight recorder: the last HETCCL_FLIGHT_RECORDER calls of one
// communicator (each collective and send/recv of a group counts once), in
// a bounded ring, and a JSON dump of them where HETCCL_FLIGHT_DIR is set:
// when the communicator fails (a timeout, a dead or failed peer, an error
// that leaves it out of step), when it is aborted, and on request.
// `hetccl-doctor DIR` reads the dumps of all ranks and names the rank that
// is behind and the calls whose ranks disagree.
//
// A record is written by the calling thread when the call is issued and
// finished by whoever learns its end: the calling thread (blocking host
// ranks), the proxy (non-blocking host ranks; GPU ranks' calls across
// groups, once it saw their border end or ran their staged plan). A GPU
// call inside one group stays "enqueued": its end is the vendor library's,
// in stream order, not seen by the host.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "observe/call_metrics.h"
#include "core/call.h"
#include "core/datatype.h"

namespace hetccl {

class FlightRecorder {
 public:
  enum class State : uint8_t { kIssued, kEnqueued, kCompleted, kFailed };
  struct Record {
    uint64_t seq = 0;  // 1, 2, ... on this communicator
    CollKind kind = CollKind::kAllReduce;
    bool isSend = false;
    size_t count = 0;
    DataType dt = hetcclFloat32;
    hetcclRedOp_t op = hetcclSum;
    int root = -1;
    State state = State::kIssued;
    bool ends = true;  // false: an enqueued call whose end this rank never sees
    hetcclResult_t result = hetcclSuccess;
    double startUs = 0, endUs = 0;  // since the recorder started (steady clock); end 0 while not ended
    // Group and border steps this rank ran for the call on the thread that
    // ran it (host ranks; a group call's steps all on its first record).
    CallMetrics::Tally steps;
  };
  struct Call {
    CollKind kind;
    bool isSend;
    size_t count;
    DataType dt;
    hetcclRedOp_t op;
    int root;
  };

  // capacity 0: records nothing (and counts no calls in `metrics`, which
  // the recorder's owner keeps alive).
  FlightRecorder(size_t capacity, std::string dir, CallMetrics* metrics = nullptr);

  // Records calls issued together; returns the first one's sequence number
  // (the others follow it), 0 when off. `willEnd` false: calls whose end
  // finish() will not see (GPU calls inside one group), counted as enqueued.
  // atUs: where given, the clock reading (clockUs) taken as their start.
  uint64_t issue(std::span<const Call> calls, State state = State::kIssued, bool willEnd = true,
                 double* atUs = nullptr);
  uint64_t issue(std::initializer_list<Call> calls, State state = State::kIssued, bool willEnd = true) {
    return issue(std::span<const Call>(calls.begin(), calls.size()), state, willEnd);
  }
  // The end of `n` calls from `first` on (those still in the ring), with
  // the steps they ran where known; at `endUs` (clockUs) where above 0
  // (a reading the caller already took), else now.
  void finish(uint64_t first, size_t n, hetcclResult_t result, const CallMetrics::Tally* steps = nullptr,
              double endUs = 0);

  // The ring as JSON (oldest first) with who wrote it and why.
  std::string json(int rank, int nranks, const std::string& commId, const std::string& reason) const;
  // Writes json() to DIR/hetccl-flight-<commId>-rank<rank>.json (once per
  // reason kind is enough: a later dump replaces an earlier one). Returns
  // the path, or "" where HETCCL_FLIGHT_DIR is unset or the recorder off;
  // a file that cannot be written is a warning, never an error of the call.
  std::string dump(int rank, int nranks, const std::string& commId, const std::string& reason) const;
  size_t size() const;
  // JSON members (no braces) the dump's header carries from init on: the
  // rank's host, group, transport and border path.
  void setContext(std::string members);
  // The newest call that ended, and the oldest still issued (seq 0: none).
  struct Progress {
    uint64_t issued = 0;  // calls recorded so far
    Record lastEnded, oldestOpen;
  };
  Progress progress() const;
  // Called (under the recorder's lock) with every record finish() ends:
  // the timeline (observe/tracer.h) takes its call spans from here. Set before
  // the first call.
  void setListener(std::function<void(const Record&)> f) { listener_ = std::move(f); }
  // The steady clock (microseconds) at which the records' times are 0.
  double originUs() const { return t0_; }
  // Whether calls are recorded (capacity above 0).
  bool on() const { return cap_ > 0; }
  // Whether dump() writes anything (on, with a folder).
  bool writes() const { return cap_ > 0 && !dir_.empty(); }

 private:
  double nowUs() const;
  size_t cap_;
  std::string dir_;
  CallMetrics* metrics_;
  double t0_;
  mutable std::mutex mu_;
  std::vector<Record> ring_;  // ring_[seq % cap_]
  uint64_t next_ = 1;
  std::function<void(const Record&)> listener_;
  std::string context_;  // under mu_
};

const char* flightStateName(FlightRecorder::State s);

}  // namespace hetccl
