// What the metrics endpoint (observe/metrics_server.h) reads of a
// communicator: its labels and its object in /status.
#include <cstdio>
#include <string>

#include "comm/comm.h"
#include "core/json.h"
#include "observe/tracer.h"

namespace hetccl {
namespace {

std::string recordJson(const FlightRecorder::Record& r, double nowUs) {
  if (r.seq == 0) return "null";
  char b[384];
  snprintf(b, sizeof(b),
           "{\"seq\": %llu, \"coll\": \"%s\", \"count\": %zu, \"dtype\": \"%s\", \"root\": %d, \"state\": \"%s\", "
           "\"result\": %d, \"age_s\": %.3f, \"duration_s\": %.6f}",
           static_cast<unsigned long long>(r.seq),
           r.kind == CollKind::kSendRecv ? (r.isSend ? "Send" : "Recv") : collKindName(r.kind), r.count,
           dataTypeName(r.dt), r.root, flightStateName(r.state), static_cast<int>(r.result),
           (nowUs - (r.endUs > 0 ? r.endUs : r.startUs)) * 1e-6, r.endUs > 0 ? (r.endUs - r.startUs) * 1e-6 : 0.0);
  return b;
}

}  // namespace

std::string Comm::metricsLabels() const { return "comm=\"" + idText() + "\",rank=\"" + std::to_string(rank_) + "\""; }

std::string Comm::infoLabels() const {
  return "nranks=\"" + std::to_string(nranks_) + "\",group=\"" + topo_.groupOfRank(rank_).name + "\",transport=\"" +
         transportName_ + "\",border_path=\"" + borderPath() + "\"";
}

std::string Comm::statusObject() const {
  const Topology& t = topo_;
  std::string groups = "[";
  for (int g = 0; g < t.ngroups(); ++g) {
    groups += g ? ", " : "";
    groups += "{\"name\": " + jsonQuoted(t.groups[g].name) + ", \"device\": " + jsonQuoted(t.groups[g].deviceKind) +
              ", \"ranks\": [";
    for (size_t i = 0; i < t.groups[g].ranks.size(); ++i)
      groups += (i ? ", " : "") + std::to_string(t.groups[g].ranks[i]);
    groups += "]}";
  }
  groups += "]";
  const FlightRecorder::Progress p = flight_.progress();
  const double nowUs = Tracer::steadyUs() - flight_.originUs();
  const bool failed = failedForGood();
  char head[256];
  snprintf(head, sizeof(head), "{\"comm\": \"%s\", \"rank\": %d, \"nranks\": %d, \"group\": %d, ", idText().c_str(),
           rank_, nranks_, myGroup());
  std::string out = head;
  out += "\"group_name\": " + jsonQuoted(t.groups[myGroup()].name) + ", ";
  out += "\"groups\": " + groups + ", \"transport\": " + jsonQuoted(transportName_) +
         ", \"border_path\": " + jsonQuoted(borderPath()) + ", \"device\": " + jsonQuoted(device_->kind()) +
         ", \"state\": \"" + (failed ? "failed" : "ok") +
         "\", \"error\": " + (failed ? jsonQuoted(failureText()) : std::string("null")) +
         ", \"calls_issued\": " + std::to_string(p.issued) + ", \"last_ended\": " + recordJson(p.lastEnded, nowUs) +
         ", \"oldest_in_flight\": " + recordJson(p.oldestOpen, nowUs) + ", " + metrics_.statusJson() + "}";
  return out;
}

}  // namespace hetccl
