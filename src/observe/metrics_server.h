// The metrics endpoint: with HETCCL_METRICS_PORT=P a process serves, over
// HTTP on HETCCL_METRICS_ADDR (127.0.0.1 unless set), port P plus its
// rank's index among the job's ranks on its host (of the first
// communicator it makes):
//   GET /metrics   Prometheus text exposition (0.0.4) of every live
//                  communicator's counters (observe/call_metrics.h), each
//                  series labelled comm="<job id>",rank="<rank>"
//   GET /status    JSON: per communicator its ranks, groups, transport,
//                  state (failure text), last ended call, oldest call in
//                  flight, and totals; what hetccl-top and hetccl-dashboard
//                  read from every rank
//   GET /          the list of the above
// Anything but GET and HEAD is refused (405). HTTP is civetweb's, loaded
// at run time (HETCCL_CIVETWEB_LIB), so the library needs it only where
// the endpoint is asked for; a library that cannot be loaded or a port
// that cannot be bound is a warning naming the setting, and collectives go
// on without the endpoint.
//
// The endpoint's threads read the counters (relaxed atomics) and the
// flight recorders (their own lock); calls never wait for the endpoint.
// The endpoint stops when the process's last communicator goes.
#pragma once

#include <string>

#include "observe/call_metrics.h"

namespace hetccl {

// What the endpoint reads of one communicator (comm/comm.h implements it).
// Any thread, while attached.
class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  // comm="<job id>",rank="<rank>": every series of it carries them.
  virtual std::string metricsLabels() const = 0;
  // hetccl_comm_info's other labels: nranks, group, transport, border path.
  virtual std::string infoLabels() const = 0;
  virtual bool failedForGood() const = 0;
  virtual const CallMetrics& counters() const = 0;
  // Its object in /status.
  virtual std::string statusObject() const = 0;
  // Its rank's index among the job's ranks on its host: the endpoint's
  // port is HETCCL_METRICS_PORT plus that of the first one attached.
  virtual int portOffset() const = 0;
};

// A communicator that finished init (the first one starts the endpoint
// where HETCCL_METRICS_PORT is set); detach before it is destroyed.
void metricsAttach(MetricsSource* c);
void metricsDetach(MetricsSource* c);
// The port the endpoint serves on, 0 when none (tests).
int metricsPort();
// What /metrics and /status serve now (also without an endpoint: tests).
std::string metricsText();
std::string statusJson();

}  // namespace hetccl
