#include "observe/tracer.h"

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

std::string withRank(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'r') {
      out += std::to_string(rank);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

std::string Tracer::formatBytes(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char out[32];
  snprintf(out, sizeof(out), v == static_cast<double>(static_cast<size_t>(v)) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return out;
}

std::string Tracer::sized(const char* what, size_t count, DataType dt) {
  return std::string(what) + " " + formatBytes(count * dataTypeSize(dt));
}

double Tracer::steadyUs() { return clockUs(); }

Tracer::Tracer(FILE* f, int rank, bool gpuRank)
    : f_(f), rank_(rank), gpuRank_(gpuRank), steady0_(steadyUs()), wall0_(wallUs()) {}

std::unique_ptr<Tracer> Tracer::open(const std::string& pattern, int rank, int nranks, const std::string& what,
                                     bool gpuRank) {
  const std::string path = withRank(pattern, rank);
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    LOG_WARN(kInit, "HETCCL_TRACE_FILE: cannot write %s (%s): this rank's calls are not traced", path.c_str(),
             strerror(errno));
    return nullptr;
  }
  std::unique_ptr<Tracer> t(new Tracer(f, rank, gpuRank));
  const std::string pid = std::to_string(rank);
  fprintf(f, "[\n");
  t->event("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid + ", \"args\": {\"name\": " +
           jsonQuoted("rank " + pid + " of " + std::to_string(nranks) + " (" + what + ")") + "}}");
  t->event("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + pid + ", \"args\": {\"sort_index\": " + pid +
           "}}");
  const char* names[] = {"", "calls", "GPU calls (issue to end seen by the proxy)", "proxy (staged steps)"};
  for (int tid = 1; tid <= 3; ++tid)
    t->event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid + ", \"tid\": " + std::to_string(tid) +
             ", \"args\": {\"name\": \"" + names[tid] + "\"}}");
  LOG_INFO(kInit, "rank %d: trace to %s", rank, path.c_str());
  return t;
}

Tracer::~Tracer() {
  std::lock_guard<std::mutex> g(mu_);
  if (!failed_) fprintf(f_, "{\"ph\": \"M\", \"name\": \"hetccl_end\", \"pid\": %d, \"args\": {}}\n]\n", rank_);
  fclose(f_);
}

void Tracer::event(const std::string& json) {
  std::lock_guard<std::mutex> g(mu_);
  if (failed_) return;
  fputs(json.c_str(), f_);
  fputs(",\n", f_);
  // Flushed per event: a rank that dies leaves what it did. A write that
  // fails (a full disk) ends the trace with one warning; calls go on.
  if (fflush(f_) != 0 || ferror(f_)) {
    failed_ = true;
    LOG_WARN(kInit, "HETCCL_TRACE_FILE: writing rank %d's trace failed (%s): tracing stops, calls go on", rank_,
             strerror(errno));
  }
}

void Tracer::setClockOffset(double us) {
  char b[160];
  snprintf(b, sizeof(b),
           "{\"ph\": \"M\", \"name\": \"hetccl_clock_offset_us\", \"pid\": %d, \"args\": {\"value\": %.1f}}", rank_,
           us);
  event(b);
}

void Tracer::call(const FlightRecorder::Record& r, double originUs) {
  const double start = wallOf(originUs + r.startUs), dur = r.endUs - r.startUs;
  const char* kind = r.kind == CollKind::kSendRecv ? (r.isSend ? "Send" : "Recv") : collKindName(r.kind);
  char b[512];
  snprintf(b, sizeof(b),
           "{\"ph\": \"X\", \"cat\": \"call\", \"name\": \"%s %s\", \"pid\": %d, \"tid\": %d, \"ts\": %.1f, "
           "\"dur\": %.1f, \"args\": {\"seq\": %llu, \"count\": %zu, \"dtype\": \"%s\", \"op\": \"%s\", "
           "\"root\": %d, \"result\": %d}}",
           kind, formatBytes(r.count * dataTypeSize(r.dt)).c_str(), rank_, gpuRank_ ? kGpuCalls : kCalls, start, dur,
           static_cast<unsigned long long>(r.seq), r.count, dataTypeName(r.dt), redOpName(r.op), r.root,
           static_cast<int>(r.result));
  event(b);
}

void Tracer::step(const char* cat, const std::string& name, double startUs) {
  const double end = steadyUs();
  char b[96];
  snprintf(b, sizeof(b), "\"pid\": %d, \"tid\": %d, \"ts\": %.1f, \"dur\": %.1f}", rank_, stepTrack(), wallOf(startUs),
           end > startUs ? end - startUs : 0.0);
  event(std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": " + jsonQuoted(name) + ", " + b);
}

}  // namespace hetccl
