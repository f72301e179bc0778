#include "observe/observed.h"

#include <string>

namespace hetccl {
namespace {

thread_local StepScope* tScope = nullptr;

void tallyStep(CallMetrics::Link link, uint64_t bytes, double us) {
  if (!tScope) return;
  tScope->tally.bytes[link] += bytes;
  tScope->tally.us[link] += us;
}

// A timed step's start: the call's, where nothing ran since it began.
double stepStart() {
  if (tScope && tScope->openUs > 0) {
    const double t = tScope->openUs;
    tScope->openUs = 0;
    return t;
  }
  return Tracer::steadyUs();
}

double stepEnd() {
  const double t = Tracer::steadyUs();
  if (tScope) {
    tScope->lastEndUs = t;
    ++tScope->timedSteps;
  }
  return t;
}

}  // namespace

StepScope::StepScope(double callStartUs) : openUs(callStartUs), outer_(tScope) { tScope = this; }
StepScope::~StepScope() { tScope = outer_; }

void noteLocalWork() {
  if (!tScope) return;
  tScope->openUs = 0;
  tScope->localWork = true;
}

void countBorderBytes(CallMetrics& m, CallMetrics::Link link, uint64_t bytes) {
  if (bytes == 0) return;
  m.linkBytes(link, bytes);
  tallyStep(link, bytes, 0);
}

void countStepTime(CallMetrics& m, CallMetrics::Link link, double us, double weight) {
  if (us < 0) return;
  m.step(link, 0, us * weight * 1e-6);
  tallyStep(link, 0, us);
}

CallMetrics::Tally takeStepTally() {
  if (!tScope) return {};
  CallMetrics::Tally t = tScope->tally;
  tScope->tally = {};
  return t;
}

void ObservedTransport::run(std::span<Xfer> xfers) {
  const double t0 = stepStart();
  size_t local = 0, remote = 0;
  for (const Xfer& x : xfers)
    (x.peer >= 0 && static_cast<size_t>(x.peer) < remote_.size() && remote_[x.peer] ? remote : local) += x.bytes;
  inner_->run(xfers);
  const double t1 = stepEnd();
  // The step's time goes to the slower link class it used: across hosts
  // where any transfer left the host.
  const CallMetrics::Link slowest = remote ? CallMetrics::kBorderRemote : CallMetrics::kBorderHost;
  if (local) m_.linkBytes(CallMetrics::kBorderHost, local);
  if (remote) m_.linkBytes(CallMetrics::kBorderRemote, remote);
  m_.step(slowest, 0, (t1 - t0) * 1e-6);
  tallyStep(CallMetrics::kBorderHost, local, 0);
  tallyStep(CallMetrics::kBorderRemote, remote, 0);
  tallyStep(slowest, 0, t1 - t0);
  if (t_)
    t_->step("border", "border: " + std::to_string(xfers.size()) + " transfers, " + Tracer::formatBytes(local + remote),
             t0);
}

void ObservedBackend::route(BackendCall call, Stream s) {
  const size_t bytes = call.elements * dataTypeSize(call.dt);
  if (depth_ > 0) {
    groupBytes_ += bytes;
    ++groupCalls_;
    call.run(inner_, s);
    return;
  }
  if (nranks() == 1 && !t_) {  // a group of one: a local copy, counted without reading the clock
    noteLocalWork();
    call.run(inner_, s);
    m_.step(CallMetrics::kGroup, bytes, 0);
    tallyStep(CallMetrics::kGroup, bytes, 0);
    return;
  }
  const double t0 = stepStart();
  call.run(inner_, s);
  const double us = stepEnd() - t0;
  m_.step(CallMetrics::kGroup, bytes, us * 1e-6);
  tallyStep(CallMetrics::kGroup, bytes, us);
  if (t_) t_->step("group", std::string("group: ") + Tracer::sized(call.what, call.elements, call.dt), t0);
}

void ObservedBackend::groupStart() {
  if (depth_++ == 0) {
    groupStart_ = stepStart();
    groupBytes_ = 0;
    groupCalls_ = 0;
  }
  inner_.groupStart();
}
void ObservedBackend::groupEnd() {
  inner_.groupEnd();
  if (--depth_ == 0) {
    const double us = stepEnd() - groupStart_;
    m_.step(CallMetrics::kGroup, groupBytes_, us * 1e-6);
    tallyStep(CallMetrics::kGroup, groupBytes_, us);
    if (t_)
      t_->step("group", "group: " + std::to_string(groupCalls_) + " calls, " + Tracer::formatBytes(groupBytes_),
               groupStart_);
  }
}

}  // namespace hetccl
