// Per-communicator counters for the metrics endpoint (observe/metrics_server.h):
// calls by collective, size class and outcome, their bytes and durations,
// the last call's bus bandwidth, bytes and time of group steps (the group's
// library) and border steps (transfers between groups, split by whether the
// peer is on this host), calls in flight and errors.
//
// Writers are the threads that run calls (the flight recorder ends each
// call here, the observed transport and backend count steps); the reader is
// the endpoint's thread. Every field is a relaxed atomic: no lock on the
// call path (the call counters are added to under the flight recorder's lock,
// which the call takes anyway), and a reader sees each counter whole (fields of one call may be
// seen one scrape apart, as with any Prometheus client).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/call.h"
#include "core/datatype.h"

namespace hetccl {

class CallMetrics {
 public:
  // Collectives as reported: CollKind's eight, then Send and Recv apart.
  static constexpr int kKinds = 10;
  // Payload size classes (bytes as nccl-tests counts them): up to 1 KiB,
  // 64 KiB, 1 MiB, 16 MiB, 256 MiB, larger.
  static constexpr int kSizes = 6;
  // Call duration histogram upper bounds in seconds; one more bucket: +Inf.
  static constexpr int kTimeBounds = 17;
  static constexpr double kTimeBound[kTimeBounds] = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                                     5e-3, 1e-2, 2.5e-2, 0.1,  0.25, 1,      10,   60};
  enum Link { kGroup, kBorderHost, kBorderRemote, kLinks };
  enum Outcome { kOk, kFailed, kEnqueued, kOutcomes };

  // The steps of one call (or of the calls of one group call), for its
  // flight record.
  struct Tally {
    double us[kLinks] = {};  // kBorderHost/kBorderRemote: time of border steps by their slowest link
    uint64_t bytes[kLinks] = {};
    Tally& operator+=(const Tally& o) {
      for (int l = 0; l < kLinks; ++l) {
        us[l] += o.us[l];
        bytes[l] += o.bytes[l];
      }
      return *this;
    }
  };

  explicit CallMetrics(int nranks) : nranks_(nranks) {}

  static int kindIndex(CollKind k, bool isSend);
  static const char* kindName(int index);
  static const char* sizeName(int index);
  static const char* linkName(int link);
  static const char* outcomeName(int outcome);
  // The payload of a call as nccl-tests sizes it (per rank counts times nranks
  // for AllGather, ReduceScatter, AlltoAll, Gather, Scatter).
  size_t payloadBytes(CollKind k, size_t count, DataType dt) const;
  // nccl-tests' bus bandwidth factor for n ranks.
  double busFactor(CollKind k) const;

  // The call counters (callsIssued, callEnded, callEnqueued) have one
  // writer at a time: the flight recorder calls them under its lock.
  // Calls issued that callEnded will end (in flight until then).
  void callsIssued(size_t n) { issued_.store(issued_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void callEnded(CollKind k, bool isSend, size_t count, DataType dt, double seconds, hetcclResult_t result);
  // A call whose end this rank never sees: a GPU call inside one group,
  // which ends on its stream, in the vendor library.
  void callEnqueued(CollKind k, bool isSend, size_t count, DataType dt);
  // A step of a call: the group's library (kGroup), or border transfers.
  void step(Link link, uint64_t bytes, double seconds);
  // Border transfer bytes with no time of their own (counted per peer).
  void linkBytes(Link link, uint64_t bytes) { linkBytes_[link].fetch_add(bytes, std::memory_order_relaxed); }

  // Prometheus text exposition of every counter, each series labelled with
  // `labels` (e.g. comm="...",rank="0"); families in the order of `families`
  // (one HELP/TYPE per family across communicators: the caller renders
  // family by family).
  static int families();
  void render(int family, const std::string& labels, std::string& out, bool header) const;
  // The counters a status page needs, as JSON members (no braces).
  std::string statusJson() const;

  uint64_t inFlight() const;

 private:
  static double loadDouble(const std::atomic<uint64_t>& a);
  static void storeDouble(std::atomic<uint64_t>& a, double v);
  int sizeIndex(size_t bytes) const;

  int nranks_;
  std::atomic<uint64_t> calls_[kKinds][kSizes][kOutcomes] = {};
  std::atomic<uint64_t> bytes_[kKinds] = {};
  std::atomic<uint64_t> busBytes_[kKinds] = {};  // bytes times the bus factor, of calls that ended well
  std::atomic<uint64_t> timeBucket_[kKinds][kTimeBounds + 1] = {};
  std::atomic<uint64_t> timeSumNs_[kKinds] = {};
  std::atomic<uint64_t> lastBusBw_[kKinds] = {};  // GB/s, as the bits of a double
  std::atomic<uint64_t> errors_[hetcclNumResults] = {};
  std::atomic<uint64_t> linkBytes_[kLinks] = {};
  std::atomic<uint64_t> linkNs_[kLinks] = {};
  std::atomic<uint64_t> issued_{0}, ended_{0};
};

}  // namespace hetccl
