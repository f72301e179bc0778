#include "observe/call_metrics.h"

#include <cstdio>
#include <cstring>

namespace hetccl {
namespace {

constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

// A call counter's add: one writer at a time (the flight recorder's lock),
// so a load and a store, without the locked read-modify-write.
void bump(std::atomic<uint64_t>& a, uint64_t v) { a.store(a.load(kRelaxed) + v, kRelaxed); }

const char* resultName(int r) {
  static const char* names[] = {"success",          "device_error",  "system_error", "internal_error",
                                "invalid_argument", "invalid_usage", "remote_error", "in_progress"};
  return r >= 0 && r < hetcclNumResults ? names[r] : "unknown";
}

struct Family {
  const char* name;
  const char* type;
  const char* help;
};

constexpr Family kFamilies[] = {
    {"hetccl_calls_total", "counter",
     "Calls by collective, payload size class and status (ok, failed; enqueued: GPU calls inside one group, "
     "whose end is on the stream)"},
    {"hetccl_bytes_total", "counter", "Payload bytes of calls that ended well (sizes as nccl-tests counts them)"},
    {"hetccl_call_duration_seconds", "histogram", "Time from issue to end of calls that ended"},
    {"hetccl_bus_bandwidth_gbps", "gauge",
     "Bus bandwidth (GB/s, nccl-tests' factors) of the last call that ended well"},
    {"hetccl_bus_bytes_total", "counter",
     "Payload bytes times nccl-tests' bus factor, of calls that ended well: rate() over the rate of "
     "hetccl_call_duration_seconds_sum is the mean bus bandwidth"},
    {"hetccl_step_bytes_total", "counter",
     "Bytes of group steps (payload handed to the group's library) and border transfers (sent plus received; "
     "border_host: a peer on this host, border_remote: on another)"},
    {"hetccl_step_seconds_total", "counter",
     "Time in group steps and border transfer steps (GPU calls through the device border under 1 MiB: about one in "
     "64, at random, timed and counted for the calls since the last one timed)"},
    {"hetccl_border_time_share", "gauge", "Border step time over group plus border step time, since init"},
    {"hetccl_calls_in_flight", "gauge",
     "Calls issued and not yet ended (enqueued GPU calls inside one group not counted)"},
    {"hetccl_errors_total", "counter", "Calls that ended in an error, by result"},
};

void header(std::string& out, const Family& f) {
  out += "# HELP ";
  out += f.name;
  out += ' ';
  out += f.help;
  out += "\n# TYPE ";
  out += f.name;
  out += ' ';
  out += f.type;
  out += '\n';
}

void sample(std::string& out, const char* name, const std::string& labels, const std::string& more, double v) {
  char num[40];
  if (v == static_cast<double>(static_cast<uint64_t>(v)) && v < 1e18)
    snprintf(num, sizeof(num), "%llu", static_cast<unsigned long long>(v));
  else
    snprintf(num, sizeof(num), "%.9g", v);
  out += name;
  out += '{';
  out += labels;
  if (!more.empty()) {
    if (!labels.empty()) out += ',';
    out += more;
  }
  out += "} ";
  out += num;
  out += '\n';
}

std::string label(const char* key, const char* value) { return std::string(key) + "=\"" + value + "\""; }

}  // namespace

int CallMetrics::kindIndex(CollKind k, bool isSend) {
  if (k == CollKind::kSendRecv) return isSend ? 8 : 9;
  return static_cast<int>(k) - 1;
}

const char* CallMetrics::kindName(int i) {
  if (i == 8) return "Send";
  if (i == 9) return "Recv";
  return collKindName(static_cast<CollKind>(i + 1));
}

const char* CallMetrics::sizeName(int i) {
  static const char* names[kSizes] = {"0-1KiB", "1KiB-64KiB", "64KiB-1MiB", "1MiB-16MiB", "16MiB-256MiB", "256MiB+"};
  return names[i];
}

const char* CallMetrics::linkName(int l) {
  static const char* names[kLinks] = {"group", "border_host", "border_remote"};
  return names[l];
}

const char* CallMetrics::outcomeName(int o) {
  static const char* names[kOutcomes] = {"ok", "failed", "enqueued"};
  return names[o];
}

int CallMetrics::sizeIndex(size_t b) const {
  const size_t bounds[kSizes - 1] = {1u << 10, 64u << 10, 1u << 20, 16u << 20, 256u << 20};
  int i = 0;
  while (i < kSizes - 1 && b > bounds[i]) ++i;
  return i;
}

size_t CallMetrics::payloadBytes(CollKind k, size_t count, DataType dt) const {
  size_t b = count * dataTypeSize(dt);
  switch (k) {
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
    case CollKind::kGather:
    case CollKind::kScatter: return b * static_cast<size_t>(nranks_);
    default: return b;
  }
}

double CallMetrics::busFactor(CollKind k) const {
  const double n = nranks_, spread = n > 1 ? (n - 1) / n : 1.0;
  switch (k) {
    case CollKind::kAllReduce: return n > 1 ? 2 * spread : 1.0;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
    case CollKind::kGather:
    case CollKind::kScatter: return spread;
    default: return 1.0;
  }
}

double CallMetrics::loadDouble(const std::atomic<uint64_t>& a) {
  const uint64_t bits = a.load(kRelaxed);
  double v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

void CallMetrics::storeDouble(std::atomic<uint64_t>& a, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof(v));
  a.store(bits, kRelaxed);
}

void CallMetrics::callEnded(CollKind k, bool isSend, size_t count, DataType dt, double seconds, hetcclResult_t result) {
  const int i = kindIndex(k, isSend);
  if (i < 0 || i >= kKinds) return;
  const size_t bytes = payloadBytes(k, count, dt);
  const int s = sizeIndex(bytes);
  if (seconds < 0) seconds = 0;  // the clock may step back by a microsecond (core/clock.h)
  bump(ended_, 1);
  if (result != hetcclSuccess) {
    bump(calls_[i][s][kFailed], 1);
    bump(errors_[result >= 0 && result < hetcclNumResults ? result : hetcclInternalError], 1);
  } else {
    bump(calls_[i][s][kOk], 1);
    bump(bytes_[i], bytes);
    bump(busBytes_[i], static_cast<uint64_t>(bytes * busFactor(k)));
    if (seconds > 0 && bytes > 0) storeDouble(lastBusBw_[i], bytes / seconds * busFactor(k) / 1e9);
  }
  int b = 0;
  while (b < kTimeBounds && seconds > kTimeBound[b]) ++b;
  bump(timeBucket_[i][b], 1);
  bump(timeSumNs_[i], static_cast<uint64_t>(seconds * 1e9));
}

void CallMetrics::callEnqueued(CollKind k, bool isSend, size_t count, DataType dt) {
  const int i = kindIndex(k, isSend);
  if (i < 0 || i >= kKinds) return;
  const size_t bytes = payloadBytes(k, count, dt);
  bump(calls_[i][sizeIndex(bytes)][kEnqueued], 1);
  bump(bytes_[i], bytes);
}

void CallMetrics::step(Link link, uint64_t bytes, double seconds) {
  if (seconds < 0) seconds = 0;
  linkBytes_[link].fetch_add(bytes, kRelaxed);
  linkNs_[link].fetch_add(static_cast<uint64_t>(seconds * 1e9), kRelaxed);
}

uint64_t CallMetrics::inFlight() const {
  const uint64_t e = ended_.load(kRelaxed), i = issued_.load(kRelaxed);
  return i > e ? i - e : 0;
}

int CallMetrics::families() { return static_cast<int>(sizeof(kFamilies) / sizeof(kFamilies[0])); }

void CallMetrics::render(int f, const std::string& labels, std::string& out, bool withHeader) const {
  const Family& fam = kFamilies[f];
  if (withHeader) header(out, fam);
  switch (f) {
    case 0:
      for (int i = 0; i < kKinds; ++i)
        for (int s = 0; s < kSizes; ++s)
          for (int o = 0; o < kOutcomes; ++o)
            if (uint64_t v = calls_[i][s][o].load(kRelaxed))  // series appear with their first call
              sample(out, fam.name, labels,
                     label("collective", kindName(i)) + "," + label("size", sizeName(s)) + "," +
                         label("status", outcomeName(o)),
                     static_cast<double>(v));
      break;
    case 1:
      for (int i = 0; i < kKinds; ++i)
        if (uint64_t v = bytes_[i].load(kRelaxed))
          sample(out, fam.name, labels, label("collective", kindName(i)), static_cast<double>(v));
      break;
    case 2:
      for (int i = 0; i < kKinds; ++i) {
        uint64_t cum = 0, counts[kTimeBounds + 1];
        for (int b = 0; b <= kTimeBounds; ++b) counts[b] = timeBucket_[i][b].load(kRelaxed);
        uint64_t total = 0;
        for (uint64_t c : counts) total += c;
        if (total == 0) continue;
        const std::string coll = label("collective", kindName(i));
        for (int b = 0; b <= kTimeBounds; ++b) {
          cum += counts[b];
          char le[32];
          if (b < kTimeBounds)
            snprintf(le, sizeof(le), "%g", kTimeBound[b]);
          else
            snprintf(le, sizeof(le), "+Inf");
          sample(out, "hetccl_call_duration_seconds_bucket", labels, coll + "," + label("le", le),
                 static_cast<double>(cum));
        }
        sample(out, "hetccl_call_duration_seconds_sum", labels, coll, timeSumNs_[i].load(kRelaxed) / 1e9);
        sample(out, "hetccl_call_duration_seconds_count", labels, coll, static_cast<double>(cum));
      }
      break;
    case 3:
      for (int i = 0; i < kKinds; ++i)
        if (double v = loadDouble(lastBusBw_[i]); v > 0)
          sample(out, fam.name, labels, label("collective", kindName(i)), v);
      break;
    case 4:
      for (int i = 0; i < kKinds; ++i)
        if (uint64_t v = busBytes_[i].load(kRelaxed))
          sample(out, fam.name, labels, label("collective", kindName(i)), static_cast<double>(v));
      break;
    case 5:
    case 6:
      for (int l = 0; l < kLinks; ++l)
        sample(out, fam.name, labels, label("link", linkName(l)),
               f == 5 ? static_cast<double>(linkBytes_[l].load(kRelaxed)) : linkNs_[l].load(kRelaxed) / 1e9);
      break;
    case 7: {
      const double g = static_cast<double>(linkNs_[kGroup].load(kRelaxed));
      const double b = static_cast<double>(linkNs_[kBorderHost].load(kRelaxed) + linkNs_[kBorderRemote].load(kRelaxed));
      sample(out, fam.name, labels, "", g + b > 0 ? b / (g + b) : 0.0);
      break;
    }
    case 8: sample(out, fam.name, labels, "", static_cast<double>(inFlight())); break;
    case 9:
      for (int r = 1; r < hetcclNumResults; ++r)  // every result, 0 included: dashboards show 0, not "no data"
        if (r != hetcclInProgress)
          sample(out, fam.name, labels, label("result", resultName(r)), static_cast<double>(errors_[r].load(kRelaxed)));
      break;
  }
}

std::string CallMetrics::statusJson() const {
  uint64_t ok = 0, failed = 0, enqueued = 0;
  for (int i = 0; i < kKinds; ++i)
    for (int s = 0; s < kSizes; ++s) {
      ok += calls_[i][s][kOk].load(kRelaxed);
      failed += calls_[i][s][kFailed].load(kRelaxed);
      enqueued += calls_[i][s][kEnqueued].load(kRelaxed);
    }
  char b[512];
  snprintf(b, sizeof(b),
           "\"calls_ok\": %llu, \"calls_failed\": %llu, \"calls_enqueued\": %llu, \"calls_in_flight\": %llu, "
           "\"group_bytes\": %llu, \"border_bytes\": %llu, \"group_seconds\": %.6f, \"border_seconds\": %.6f",
           static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed),
           static_cast<unsigned long long>(enqueued), static_cast<unsigned long long>(inFlight()),
           static_cast<unsigned long long>(linkBytes_[kGroup].load(kRelaxed)),
           static_cast<unsigned long long>(linkBytes_[kBorderHost].load(kRelaxed) +
                                           linkBytes_[kBorderRemote].load(kRelaxed)),
           linkNs_[kGroup].load(kRelaxed) / 1e9,
           (linkNs_[kBorderHost].load(kRelaxed) + linkNs_[kBorderRemote].load(kRelaxed)) / 1e9);
  return b;
}

}  // namespace hetccl
