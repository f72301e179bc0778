#include "observe/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"

namespace hetccl {
namespace {

double wallUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

const char* flightStateName(FlightRecorder::State s) {
  switch (s) {
    case FlightRecorder::State::kIssued: return "issued";
    case FlightRecorder::State::kEnqueued: return "enqueued";
    case FlightRecorder::State::kCompleted: return "completed";
    case FlightRecorder::State::kFailed: return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity, std::string dir, CallMetrics* metrics)
    : cap_(capacity), dir_(std::move(dir)), metrics_(metrics), t0_(clockUs()), ring_(capacity) {}

double FlightRecorder::nowUs() const { return clockUs() - t0_; }

uint64_t FlightRecorder::issue(std::span<const Call> calls, State state, bool willEnd, double* atUs) {
  if (cap_ == 0 || calls.empty()) return 0;
  std::lock_guard<std::mutex> g(mu_);  // also the call counters' (see CallMetrics)
  if (metrics_) {
    if (willEnd)
      metrics_->callsIssued(calls.size());
    else
      for (const Call& c : calls) metrics_->callEnqueued(c.kind, c.isSend, c.count, c.dt);
  }
  const uint64_t first = next_;
  const double now = clockUs();
  if (atUs) *atUs = now;
  const double t = now - t0_;
  for (const Call& c : calls) {
    Record& r = ring_[next_ % cap_];
    r = Record{};
    r.seq = next_++;
    r.kind = c.kind;
    r.isSend = c.isSend;
    r.count = c.count;
    r.dt = c.dt;
    r.op = c.op;
    r.root = c.root;
    r.state = state;
    r.ends = willEnd;
    r.startUs = t;
  }
  return first;
}

void FlightRecorder::finish(uint64_t first, size_t n, hetcclResult_t result, const CallMetrics::Tally* steps,
                            double endUs) {
  if (cap_ == 0 || first == 0) return;
  std::lock_guard<std::mutex> g(mu_);
  const double t = (endUs > 0 ? endUs : clockUs()) - t0_;
  for (uint64_t s = first; s < first + n; ++s) {
    Record& r = ring_[s % cap_];
    if (r.seq != s) continue;  // overwritten since
    r.state = result == hetcclSuccess ? State::kCompleted : State::kFailed;
    r.result = result;
    r.endUs = t > r.startUs ? t : r.startUs;  // the clock may step back by a microsecond
    if (steps && s == first) r.steps = *steps;
    if (metrics_) metrics_->callEnded(r.kind, r.isSend, r.count, r.dt, (t - r.startUs) * 1e-6, result);
    if (listener_) listener_(r);
  }
}

size_t FlightRecorder::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return next_ - 1 < cap_ ? next_ - 1 : cap_;
}

void FlightRecorder::setContext(std::string members) {
  std::lock_guard<std::mutex> g(mu_);
  context_ = std::move(members);
}

FlightRecorder::Progress FlightRecorder::progress() const {
  std::lock_guard<std::mutex> g(mu_);
  Progress p;
  p.issued = next_ - 1;
  const uint64_t from = p.issued >= cap_ ? p.issued - cap_ + 1 : 1;
  for (uint64_t s = from; s <= p.issued && cap_; ++s) {
    const Record& r = ring_[s % cap_];
    if (r.seq != s) continue;
    const bool open = r.ends && (r.state == State::kIssued || r.state == State::kEnqueued);
    if (r.state == State::kCompleted || r.state == State::kFailed) p.lastEnded = r;
    if (open && p.oldestOpen.seq == 0) p.oldestOpen = r;
  }
  return p;
}

std::string FlightRecorder::json(int rank, int nranks, const std::string& commId, const std::string& reason) const {
  std::lock_guard<std::mutex> g(mu_);
  char head[512];
  snprintf(head, sizeof(head),
           "{\n \"format\": \"hetccl-flight-1\",\n \"comm\": %s,\n \"rank\": %d,\n \"nranks\": %d,\n"
           " \"pid\": %d,\n \"reason\": %s,\n \"dumped_unix_us\": %.0f,\n \"dumped_us\": %.1f,\n",
           jsonQuoted(commId).c_str(), rank, nranks, static_cast<int>(getpid()), jsonQuoted(reason).c_str(), wallUs(),
           nowUs());
  std::string out = head;
  if (!context_.empty()) out += " " + context_ + ",\n";
  out += " \"records\": [";
  const uint64_t last = next_ - 1;
  const uint64_t from = last >= cap_ ? last - cap_ + 1 : 1;
  bool firstOut = true;
  for (uint64_t s = from; s <= last && cap_; ++s) {
    const Record& r = ring_[s % cap_];
    if (r.seq != s) continue;
    char line[768];
    snprintf(line, sizeof(line),
             "%s\n  {\"seq\": %llu, \"coll\": \"%s\", \"count\": %zu, \"dtype\": \"%s\", \"op\": \"%s\", "
             "\"root\": %d, \"state\": \"%s\", \"result\": %d, \"start_us\": %.1f, \"end_us\": %.1f, "
             "\"group_us\": %.1f, \"border_us\": %.1f, \"group_bytes\": %llu, \"border_host_bytes\": %llu, "
             "\"border_remote_bytes\": %llu}",
             firstOut ? "" : ",", static_cast<unsigned long long>(r.seq),
             r.kind == CollKind::kSendRecv ? (r.isSend ? "Send" : "Recv") : collKindName(r.kind), r.count,
             dataTypeName(r.dt), redOpName(r.op), r.root, flightStateName(r.state), static_cast<int>(r.result),
             r.startUs, r.endUs, r.steps.us[CallMetrics::kGroup],
             r.steps.us[CallMetrics::kBorderHost] + r.steps.us[CallMetrics::kBorderRemote],
             static_cast<unsigned long long>(r.steps.bytes[CallMetrics::kGroup]),
             static_cast<unsigned long long>(r.steps.bytes[CallMetrics::kBorderHost]),
             static_cast<unsigned long long>(r.steps.bytes[CallMetrics::kBorderRemote]));
    out += line;
    firstOut = false;
  }
  return out + "\n ]\n}\n";
}

std::string FlightRecorder::dump(int rank, int nranks, const std::string& commId, const std::string& reason) const {
  if (cap_ == 0 || dir_.empty()) return "";
  const std::string path = dir_ + "/hetccl-flight-" + commId + "-rank" + std::to_string(rank) + ".json";
  const std::string text = json(rank, nranks, commId, reason);
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t at = 0; ok && at < text.size();) {
    ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) at += static_cast<size_t>(n);
  }
  const int err = errno;
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) ok = false;
  if (!ok) {
    unlink(tmp.c_str());
    LOG_WARN(kInit, "flight recorder: cannot write %s (HETCCL_FLIGHT_DIR): %s", path.c_str(),
             strerror(err ? err : errno));
    return "";
  }
  LOG_WARN(kInit, "flight recorder: rank %d wrote its last %zu calls to %s (%s)", rank, size(), path.c_str(),
           reason.c_str());
  return path;
}

}  // namespace hetccl
