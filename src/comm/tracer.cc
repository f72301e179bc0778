#include "comm/tracer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

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

// 8 B, 4 KiB, 1.5 MiB, ...
std::string formatBytes(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char out[32];
  snprintf(out, sizeof(out), v == static_cast<double>(static_cast<size_t>(v)) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return out;
}

std::string sized(const char* what, size_t count, DataType dt) {
  return std::string(what) + " " + formatBytes(count * dataTypeSize(dt));
}

}  // namespace

double Tracer::steadyUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Tracer::Tracer(FILE* f, int rank, bool streamOrdered)
    : f_(f), rank_(rank), streamOrdered_(streamOrdered), steady0_(steadyUs()), wall0_(wallUs()) {}

std::unique_ptr<Tracer> Tracer::open(const std::string& pattern, int rank, int nranks, const std::string& what,
                                     bool streamOrdered) {
  const std::string path = withRank(pattern, rank);
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    LOG_WARN(kInit, "HETCCL_TRACE_FILE: cannot write %s (%s): this rank's calls are not traced", path.c_str(),
             strerror(errno));
    return nullptr;
  }
  std::unique_ptr<Tracer> t(new Tracer(f, rank, streamOrdered));
  const std::string pid = std::to_string(rank);
  fprintf(f, "[\n");
  t->event("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid + ", \"args\": {\"name\": " +
           jsonQuoted("rank " + pid + " of " + std::to_string(nranks) + " (" + what + ")") + "}}");
  t->event("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + pid + ", \"args\": {\"sort_index\": " +
           pid + "}}");
  const char* names[] = {"", "calls", "GPU calls (issue to end seen by the proxy)", "proxy (staged steps)"};
  for (int tid = 1; tid <= 3; ++tid)
    t->event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid + ", \"tid\": " + std::to_string(tid) +
             ", \"args\": {\"name\": \"" + names[tid] + "\"}}");
  LOG_INFO(kInit, "rank %d: trace to %s", rank, path.c_str());
  return t;
}

Tracer::~Tracer() {
  std::lock_guard<std::mutex> g(mu_);
  fprintf(f_, "{\"ph\": \"M\", \"name\": \"hetccl_end\", \"pid\": %d, \"args\": {}}\n]\n", rank_);
  fclose(f_);
}

void Tracer::event(const std::string& json) {
  std::lock_guard<std::mutex> g(mu_);
  fputs(json.c_str(), f_);
  fputs(",\n", f_);
  fflush(f_);  // a rank that dies leaves what it did
}

void Tracer::setClockOffset(double us) {
  char b[160];
  snprintf(b, sizeof(b), "{\"ph\": \"M\", \"name\": \"hetccl_clock_offset_us\", \"pid\": %d, \"args\": {\"value\": %.1f}}",
           rank_, us);
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
           kind, formatBytes(r.count * dataTypeSize(r.dt)).c_str(), rank_, streamOrdered_ ? kGpuCalls : kCalls, start,
           dur, static_cast<unsigned long long>(r.seq), r.count, dataTypeName(r.dt), redOpName(r.op), r.root,
           static_cast<int>(r.result));
  event(b);
}

void Tracer::step(const char* cat, const std::string& name, double startUs) {
  const double end = steadyUs();
  char b[96];
  snprintf(b, sizeof(b), "\"pid\": %d, \"tid\": %d, \"ts\": %.1f, \"dur\": %.1f}", rank_, stepTrack(),
           wallOf(startUs), end - startUs);
  event(std::string("{\"ph\": \"X\", \"cat\": \"") + cat + "\", \"name\": " + jsonQuoted(name) + ", " + b);
}

void TracingTransport::run(std::span<Xfer> xfers) {
  const double t0 = Tracer::steadyUs();
  size_t bytes = 0;
  for (const Xfer& x : xfers) bytes += x.bytes;
  inner_->run(xfers);
  t_.step("border", "border: " + std::to_string(xfers.size()) + " transfers, " + formatBytes(bytes), t0);
}

template <class F>
void TracingBackend::traced(const char* what, size_t count, DataType dt, F&& f) {
  if (depth_ > 0) {
    groupBytes_ += count * dataTypeSize(dt);
    ++groupCalls_;
    f();
    return;
  }
  const double t0 = Tracer::steadyUs();
  f();
  t_.step("group", std::string("group: ") + sized(what, count, dt), t0);
}

void TracingBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) {
  traced("AllReduce", count, dt, [&] { inner_.allReduce(send, recv, count, dt, op, s); });
}
void TracingBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                                   Stream s) {
  traced("ReduceScatter", recvcount * static_cast<size_t>(nranks()), dt,
         [&] { inner_.reduceScatter(send, recv, recvcount, dt, op, s); });
}
void TracingBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) {
  traced("AllGather", sendcount * static_cast<size_t>(nranks()), dt,
         [&] { inner_.allGather(send, recv, sendcount, dt, s); });
}
void TracingBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) {
  traced("Broadcast", count, dt, [&] { inner_.broadcast(send, recv, count, dt, root, s); });
}
void TracingBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                            Stream s) {
  traced("Reduce", count, dt, [&] { inner_.reduce(send, recv, count, dt, op, root, s); });
}
void TracingBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream s) {
  traced("Send", count, dt, [&] { inner_.send(buf, count, dt, peer, s); });
}
void TracingBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream s) {
  traced("Recv", count, dt, [&] { inner_.recv(buf, count, dt, peer, s); });
}
void TracingBackend::groupStart() {
  if (depth_++ == 0) {
    groupStart_ = Tracer::steadyUs();
    groupBytes_ = 0;
    groupCalls_ = 0;
  }
  inner_.groupStart();
}
void TracingBackend::groupEnd() {
  inner_.groupEnd();
  if (--depth_ == 0)
    t_.step("group", "group: " + std::to_string(groupCalls_) + " calls, " + formatBytes(groupBytes_), groupStart_);
}

}  // namespace hetccl
