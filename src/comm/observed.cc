#include "comm/observed.h"

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

template <class F>
void ObservedBackend::observed(const char* what, size_t count, DataType dt, F&& f) {
  if (depth_ > 0) {
    groupBytes_ += count * dataTypeSize(dt);
    ++groupCalls_;
    f();
    return;
  }
  if (nranks() == 1 && !t_) {  // a group of one: a local copy, counted without reading the clock
    noteLocalWork();
    f();
    m_.step(CallMetrics::kGroup, count * dataTypeSize(dt), 0);
    tallyStep(CallMetrics::kGroup, count * dataTypeSize(dt), 0);
    return;
  }
  const double t0 = stepStart();
  f();
  const double us = stepEnd() - t0;
  m_.step(CallMetrics::kGroup, count * dataTypeSize(dt), us * 1e-6);
  tallyStep(CallMetrics::kGroup, count * dataTypeSize(dt), us);
  if (t_) t_->step("group", std::string("group: ") + Tracer::sized(what, count, dt), t0);
}

void ObservedBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) {
  observed("AllReduce", count, dt, [&] { inner_.allReduce(send, recv, count, dt, op, s); });
}
void ObservedBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                                    Stream s) {
  observed("ReduceScatter", recvcount * static_cast<size_t>(nranks()), dt,
           [&] { inner_.reduceScatter(send, recv, recvcount, dt, op, s); });
}
void ObservedBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) {
  observed("AllGather", sendcount * static_cast<size_t>(nranks()), dt,
           [&] { inner_.allGather(send, recv, sendcount, dt, s); });
}
void ObservedBackend::reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                          const ReduceOp& op, Stream s) {
  observed("ReduceScatter", bounds.back(), dt, [&] { inner_.reduceScatterShards(send, recv, bounds, dt, op, s); });
}
void ObservedBackend::allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) {
  observed("AllGather", bounds.back(), dt, [&] { inner_.allGatherShards(buf, bounds, dt, s); });
}
void ObservedBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) {
  observed("Broadcast", count, dt, [&] { inner_.broadcast(send, recv, count, dt, root, s); });
}
void ObservedBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                             Stream s) {
  observed("Reduce", count, dt, [&] { inner_.reduce(send, recv, count, dt, op, root, s); });
}
void ObservedBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream s) {
  observed("Send", count, dt, [&] { inner_.send(buf, count, dt, peer, s); });
}
void ObservedBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream s) {
  observed("Recv", count, dt, [&] { inner_.recv(buf, count, dt, peer, s); });
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
