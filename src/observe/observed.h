// The steps of a call as the metrics (observe/call_metrics.h) and, where
// HETCCL_TRACE_FILE is set, the timeline (observe/tracer.h) see them: the
// communicator's border transport and its group backend wrapped so that
// every run() and every collective of the group's library is counted
// (bytes, time) and, when tracing, written as a step span.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/wrapping_backend.h"
#include "observe/call_metrics.h"
#include "observe/tracer.h"
#include "transport/transport.h"

namespace hetccl {

// The steps the calling thread runs while it lives go into `tally` (as well
// as into the communicator's counters): the API layer holds one around a
// call it runs, and puts the tally into the call's flight record.
//
// Clock reads shared with the call (each read costs 10-45 ns, a call of
// 8 bytes a few microseconds): where the call runs on the thread that
// issued it, `callStartUs` is the call's start, and the call's first step
// starts there unless local work (a copy, a fold) ran before it; the span
// between is hetccl's own dispatch (and a communicator's first-use set-up). A call of exactly one timed step and no
// local work ends where that step ended (soleStepEndUs). So such a call
// reads the clock twice: at its start and at its step's end.
struct StepScope {
  explicit StepScope(double callStartUs = 0);
  ~StepScope();
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;
  CallMetrics::Tally tally;
  // The end of the call's one step (clockUs), or 0 where it ran another
  // step or local work, or none.
  double soleStepEndUs() const { return timedSteps == 1 && !localWork ? lastEndUs : 0; }

  double openUs;  // the call's start while no step or local work has used it
  double lastEndUs = 0;
  int timedSteps = 0;
  bool localWork = false;

 private:
  StepScope* outer_;
};

// Local work of a call outside its steps (the plan's copies and folds): the
// steps around it keep their own clock reads.
void noteLocalWork();

// What the steps the calling thread ran since the last take added up to, in
// the innermost StepScope it holds (zero when none), which starts again from
// zero. The proxy holds one for its whole life: a GPU rank's calls across
// groups run their steps in its jobs, and the job that ends them takes the
// sum for their flight record.
CallMetrics::Tally takeStepTally();
// Border bytes moved without a transport (the device border's copies into
// shared memory), with no time of their own: into m and the thread's tally.
void countBorderBytes(CallMetrics& m, CallMetrics::Link link, uint64_t bytes);
// A step timed elsewhere (the device border's calls: between events on the
// device), into m (times `weight`: the calls a sampled small call stands
// for, the gap that ended at it) and the thread's tally (the call's own
// time, for its record).
void countStepTime(CallMetrics& m, CallMetrics::Link link, double us, double weight = 1);

// The transport with each run() counted as a border step (plans use the
// communicator's transport for transfers between groups only; the host
// backend keeps the inner one for its group steps). remoteHost[r]: global
// rank r is on another host.
class ObservedTransport : public Transport {
 public:
  ObservedTransport(std::unique_ptr<Transport> inner, CallMetrics& m, Tracer* t, std::vector<uint8_t> remoteHost)
      : inner_(std::move(inner)), m_(m), t_(t), remote_(std::move(remoteHost)) {}
  const char* name() const override { return inner_->name(); }
  void run(std::span<Xfer> xfers) override;
  void drain() override { inner_->drain(); }
  void forgetLazy() override { inner_->forgetLazy(); }
  void poison(const std::string& why) override { inner_->poison(why); }

 private:
  std::unique_ptr<Transport> inner_;
  CallMetrics& m_;
  Tracer* t_;
  std::vector<uint8_t> remote_;
};

// A group backend with each collective counted (and traced) as a group step.
class ObservedBackend : public WrappingBackend {
 public:
  ObservedBackend(Backend& inner, const BackendContext& ctx, CallMetrics& m, Tracer* t)
      : WrappingBackend(inner, ctx), m_(m), t_(t) {}
  void groupStart() override;
  void groupEnd() override;

 protected:
  // Runs the call as one group step, unless inside a backend group, whose
  // end is the step.
  void route(BackendCall call, Stream s) override;

 private:
  CallMetrics& m_;
  Tracer* t_;
  int depth_ = 0;
  double groupStart_ = 0;
  size_t groupBytes_ = 0;
  int groupCalls_ = 0;
};

}  // namespace hetccl
