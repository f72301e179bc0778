#include "core/clock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace hetccl {
namespace {

double chronoUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

#if defined(__x86_64__)

uint64_t ticks() { return __rdtsc(); }

// The kernel's own clock reads the TSC (it moves off it where it found the
// TSC unsynchronised between CPUs or unstable).
bool kernelTrustsTsc() {
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (!f) return false;
  char name[64] = {};
  const bool read = fgets(name, sizeof(name), f) != nullptr;
  fclose(f);
  return read && (strncmp(name, "tsc", 3) == 0 || strncmp(name, "kvm-clock", 9) == 0);
}

// Both flags on every CPU: the TSC ticks at one rate in every P- and C-state.
bool invariantTsc() {
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    constant = strstr(line, " constant_tsc") != nullptr;
    nonstop = strstr(line, " nonstop_tsc") != nullptr;
    break;  // the first CPU's flags stand for all of them
  }
  fclose(f);
  return constant && nonstop;
}

constexpr double kRefreshUs = 50000;

// The anchor under a sequence lock: odd while being moved. Fields are
// atomics (relaxed) so that a reader racing the mover is defined; the
// sequence tells it to read again.
struct Scaled {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> tsc{0};
  std::atomic<double> us{0}, usPerTick{0};
  std::atomic<uint64_t> refreshTicks{0};
  std::atomic<bool> moving{false};

  // A TSC value and the steady time read between two TSC reads, from the
  // closest of a few tries (a preemption between the reads is then left out).
  static void pair(uint64_t& t, double& u) {
    uint64_t best = ~uint64_t{0};
    for (int i = 0; i < 4; ++i) {
      const uint64_t a = ticks();
      const double v = chronoUs();
      const uint64_t b = ticks();
      if (b - a < best) {
        best = b - a;
        t = a + (b - a) / 2;
        u = v;
      }
    }
  }

  void set(uint64_t t, double u, double k) {
    const uint64_t s = seq.load(std::memory_order_relaxed);
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    tsc.store(t, std::memory_order_relaxed);
    us.store(u, std::memory_order_relaxed);
    usPerTick.store(k, std::memory_order_relaxed);
    refreshTicks.store(static_cast<uint64_t>(kRefreshUs / k), std::memory_order_relaxed);
    seq.store(s + 2, std::memory_order_release);
  }

  // First scale: two anchors 2 ms apart.
  void calibrate() {
    uint64_t t0 = 0, t1 = 0;
    double u0 = 0, u1 = 0;
    pair(t0, u0);
    do pair(t1, u1);
    while (u1 - u0 < 2000);
    set(t1, u1, (u1 - u0) / static_cast<double>(t1 - t0));
  }

  // The scale over the last anchor's span, then a new anchor (one mover at a time).
  void refresh(uint64_t at, double au) {
    if (moving.exchange(true, std::memory_order_acquire)) return;
    uint64_t t = 0;
    double u = 0;
    pair(t, u);
    if (t > at && u > au) set(t, u, (u - au) / static_cast<double>(t - at));
    moving.store(false, std::memory_order_release);
  }

  double now() {
    const uint64_t t = ticks();
    for (;;) {
      const uint64_t s = seq.load(std::memory_order_acquire);
      if (s & 1) continue;
      const uint64_t at = tsc.load(std::memory_order_relaxed);
      const double au = us.load(std::memory_order_relaxed);
      const double k = usPerTick.load(std::memory_order_relaxed);
      const uint64_t every = refreshTicks.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq.load(std::memory_order_relaxed) != s) continue;
      const int64_t d = static_cast<int64_t>(t - at);
      if (d > static_cast<int64_t>(every)) refresh(at, au);
      return au + static_cast<double>(d) * k;
    }
  }
};

// Nanoseconds per read of each clock, the better of two passes.
template <class F>
double costNs(F&& read) {
  double best = 1e9;
  for (int pass = 0; pass < 2; ++pass) {
    const auto a = std::chrono::steady_clock::now();
    volatile double sink = 0;
    for (int i = 0; i < 256; ++i) sink = sink + static_cast<double>(read());
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - a).count() / 256;
    if (ns < best) best = ns;
  }
  return best;
}

struct Source {
  Scaled scaled;
  bool tsc = false;
  Source() {
    if (!invariantTsc() || !kernelTrustsTsc()) return;
    const double tscNs = costNs([] { return ticks(); });
    const double steadyNs = costNs([] { return chronoUs(); });
    if (tscNs >= steadyNs) return;  // e.g. a TSC read that traps to the hypervisor
    scaled.calibrate();
    tsc = true;
  }
};

Source& source0() {
  static Source s;
  return s;
}

#endif

}  // namespace

double clockUs() {
#if defined(__x86_64__)
  Source& s = source0();
  if (s.tsc) return s.scaled.now();
#endif
  return chronoUs();
}

const char* clockSource() {
#if defined(__x86_64__)
  if (source0().tsc) return "tsc";
#endif
  return "steady";
}

}  // namespace hetccl
