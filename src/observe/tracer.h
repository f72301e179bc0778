// The timeline: with HETCCL_TRACE_FILE=path (%r: the rank) each rank
// writes its calls and their steps as Chrome trace events (the JSON array
// form, which Perfetto and chrome://tracing open), one process per rank:
//   track 1 "calls"      a host rank's calls (issue to end) and, nested in
//                        them, their group steps (the group's library) and
//                        border steps (transfers between groups);
//   track 2 "GPU calls"  a GPU rank's calls, from issue to the end the
//                        proxy saw (calls inside one group: none);
//   track 3 "proxy"      the group and border steps of GPU calls that the
//                        proxy runs (staged); the device border's own steps
//                        run on the GPU, in stream order, and show only in
//                        their call's span.
// Times are this host's wall clock in microseconds; the file's metadata
// holds this rank's clock offset to rank 0 as measured at init (both ranks
// read their clocks when one bootstrap exchange ended), which
// `hetccl-trace merge` removes. Events are appended as they end, so a rank
// that dies leaves a readable file (the closing bracket is optional). A
// path that cannot be written is a warning naming the setting; the calls
// go on untraced.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "observe/flight_recorder.h"
#include "core/datatype.h"

namespace hetccl {

class Tracer {
 public:
  enum Track { kCalls = 1, kGpuCalls = 2, kProxy = 3 };
  // Opens pattern with %r replaced by rank; null (after a warning) where it
  // cannot be written.
  static std::unique_ptr<Tracer> open(const std::string& pattern, int rank, int nranks, const std::string& what,
                                      bool gpuRank);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Where this rank's wall clock stood against rank 0's (microseconds, to subtract).
  void setClockOffset(double us);
  // A finished call of the flight recorder (its times from originUs on).
  void call(const FlightRecorder::Record& r, double originUs);
  // A step [startUs, now) of the steady clock: cat "group" or "border".
  void step(const char* cat, const std::string& name, double startUs);
  // The track steps go to: kCalls for host ranks, kProxy for GPU ranks.
  int stepTrack() const { return gpuRank_ ? kProxy : kCalls; }
  static double steadyUs();
  // "AllReduce 1.5 MiB"
  static std::string sized(const char* what, size_t count, DataType dt);
  // 8 B, 4 KiB, 1.5 MiB
  static std::string formatBytes(size_t b);

 private:
  Tracer(FILE* f, int rank, bool gpuRank);
  void event(const std::string& json);
  double wallOf(double steady) const { return wall0_ + (steady - steady0_); }
  std::mutex mu_;
  FILE* f_;
  int rank_;
  bool gpuRank_;
  bool failed_ = false;  // a write failed: nothing more is written
  double steady0_, wall0_;
};

}  // namespace hetccl
