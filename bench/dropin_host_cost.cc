// hetccl-dropin-host-cost: the host time hetccl's drop-in (libnccl.so.2)
// adds to a call that it passes through to the vendor library, on a CPU.
// The vendor library is bench/standin_nccl.c, whose calls return at once,
// and the CUDA runtime bench/standin_cudart.c, which counts its calls: each
// case runs the same calls straight into the stand-in NCCL and through the
// drop-in (a one-rank communicator of one group, whose calls go to that
// library), in alternating rounds in one process. The difference is what
// hetccl adds; on an H100 NCCL's own host time is about 5.2 us a call, so
// 1.05x there is about 250 ns here. What a real GPU adds on top (each
// runtime call costs 0.1-1 us there) shows as the runtime calls per call.
//
//   hetccl-dropin-host-cost [--iters N] [--rounds R] [--max-runtime-calls K]
//                           [--dropin PATH] [--baseline PATH] [--nccl PATH] [--cudart PATH]
// --baseline: another build's libnccl.so.2, timed in the same rounds (its
// added time and calls follow on each line: before and after a change).
// Prints per case:
//   ratio dropin_host_cost <case> vendor_ns=<t> dropin_ns=<t> added_ns=<t> runtime_calls=<per call>
//         vendor_calls=<per call>                    (one line; the best round of each side)
//   runtime_calls <case> <name>=<per call> ...      (where any)
// Exits 1 where a call fails, a case makes more runtime calls a call than
// --max-runtime-calls, or (--no-extra-vendor-calls) more calls into the
// vendor library than the application made (checks of what hetccl calls,
// never of time).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct UniqueId {
  char internal[128];
};
using Comm = void*;

// The NCCL calls a case makes, from one library (the stand-in or the drop-in).
struct Nccl {
  int (*getUniqueId)(UniqueId*);
  int (*commInitRank)(Comm*, int, UniqueId, int);
  int (*commDestroy)(Comm);
  const char* (*getLastError)(Comm);
  int (*allReduce)(const void*, void*, size_t, int, int, Comm, void*);
  int (*broadcast)(const void*, void*, size_t, int, int, Comm, void*);
  int (*reduce)(const void*, void*, size_t, int, int, int, Comm, void*);
  int (*allGather)(const void*, void*, size_t, int, Comm, void*);
  int (*reduceScatter)(const void*, void*, size_t, int, int, Comm, void*);
  int (*send)(const void*, size_t, int, int, Comm, void*);
  int (*recv)(void*, size_t, int, int, Comm, void*);
  int (*groupStart)();
  int (*groupEnd)();
};

void* open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dropin_host_cost: cannot load %s: %s\n", path.c_str(), dlerror());
    exit(2);
  }
  return h;
}

template <typename F>
void sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) {
    fprintf(stderr, "dropin_host_cost: missing %s\n", name);
    exit(2);
  }
}

Nccl bind(void* h) {
  Nccl n{};
  sym(h, "ncclGetUniqueId", n.getUniqueId);
  sym(h, "ncclCommInitRank", n.commInitRank);
  sym(h, "ncclCommDestroy", n.commDestroy);
  sym(h, "ncclGetLastError", n.getLastError);
  sym(h, "ncclAllReduce", n.allReduce);
  sym(h, "ncclBroadcast", n.broadcast);
  sym(h, "ncclReduce", n.reduce);
  sym(h, "ncclAllGather", n.allGather);
  sym(h, "ncclReduceScatter", n.reduceScatter);
  sym(h, "ncclSend", n.send);
  sym(h, "ncclRecv", n.recv);
  sym(h, "ncclGroupStart", n.groupStart);
  sym(h, "ncclGroupEnd", n.groupEnd);
  return n;
}

// The stand-in runtime's counters (bench/standin_cudart.c).
struct Counters {
  int (*n)();
  const char* (*name)(int);
  unsigned long long (*count)(int);
  unsigned long long (*vendor)();
  std::vector<unsigned long long> read() const {
    std::vector<unsigned long long> v(n() + 1);
    for (int k = 0; k < n(); ++k) v[k] = count(k);
    v[n()] = vendor();
    return v;
  }
};

double nowNs() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Case {
  const char* name;
  // One application call (or group of calls) on `n`'s communicator `c`.
  std::function<int(const Nccl& n, Comm c)> run;
};

}  // namespace

// One library the cases run through, with its communicator and what a
// case measured there.
struct Side {
  Side(const char* w, const Nccl& n) : what(w), nccl(n) {}
  const char* what;
  Nccl nccl;
  Comm comm = nullptr;
  double bestNs = 1e300;
  std::vector<unsigned long long> delta;  // counters over one measured round
};

int main(int argc, char** argv) {
  int iters = 20000, rounds = 7;
  long maxRuntimeCalls = -1;
  bool noExtraVendorCalls = false;
  std::string dropin = HETCCL_BENCH_DROPIN, ncclPath = HETCCL_BENCH_STANDIN_NCCL, cudart = HETCCL_BENCH_STANDIN_CUDART,
              baseline;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "dropin_host_cost: %s needs a value\n", argv[i]);
        exit(2);
      }
      return argv[++i];
    };
    if (!strcmp(argv[i], "--iters")) {
      iters = atoi(value());
    } else if (!strcmp(argv[i], "--rounds")) {
      rounds = atoi(value());
    } else if (!strcmp(argv[i], "--max-runtime-calls")) {
      maxRuntimeCalls = atol(value());
    } else if (!strcmp(argv[i], "--no-extra-vendor-calls")) {
      noExtraVendorCalls = true;
    } else if (!strcmp(argv[i], "--dropin")) {
      dropin = value();
    } else if (!strcmp(argv[i], "--baseline")) {
      baseline = value();
    } else if (!strcmp(argv[i], "--nccl")) {
      ncclPath = value();
    } else if (!strcmp(argv[i], "--cudart")) {
      cudart = value();
    } else {
      fprintf(stderr,
              "usage: dropin_host_cost [--iters N] [--rounds R] [--max-runtime-calls K] [--no-extra-vendor-calls] "
              "[--dropin PATH] "
              "[--baseline PATH] [--nccl PATH] [--cudart PATH]\n");
      return 2;
    }
  }
  if (iters < 1 || rounds < 1) {
    fprintf(stderr, "dropin_host_cost: --iters %d and --rounds %d must be at least 1\n", iters, rounds);
    return 2;
  }
  // The drop-ins read these when they make their first communicator.
  setenv("HETCCL_CUDA_LIB", cudart.c_str(), 1);
  setenv("HETCCL_NCCL_LIB", ncclPath.c_str(), 1);
  unsetenv("HETCCL_DEVICE");
  void* rt = open(cudart);
  void* vendorLib = open(ncclPath);
  Counters counters{};
  sym(rt, "standinCudartCounters", counters.n);
  sym(rt, "standinCudartName", counters.name);
  sym(rt, "standinCudartCount", counters.count);
  sym(vendorLib, "standinNcclCalls", counters.vendor);
  int (*cudaMalloc)(void**, size_t) = nullptr;
  int (*cudaStreamCreate)(void**, unsigned) = nullptr;
  sym(rt, "cudaMalloc", cudaMalloc);
  sym(rt, "cudaStreamCreateWithFlags", cudaStreamCreate);
  // Each drop-in is a library of its own (RTLD_LOCAL): two builds of hetccl
  // side by side in one process, each with its own communicator.
  std::vector<Side> sides{Side("the stand-in NCCL", bind(vendorLib)), Side("the drop-in", bind(open(dropin)))};
  if (!baseline.empty()) sides.emplace_back("the baseline drop-in", bind(open(baseline)));
  for (Side& s : sides) {
    UniqueId id{};
    if (s.nccl.getUniqueId(&id) || s.nccl.commInitRank(&s.comm, 1, id, 0)) {
      fprintf(stderr, "dropin_host_cost: init through %s failed: %s\n", s.what, s.nccl.getLastError(nullptr));
      return 1;
    }
  }
  const size_t count = 1024;  // floats: the size never reaches the stand-in's work
  void *a = nullptr, *b = nullptr, *stream = nullptr;
  if (cudaMalloc(&a, count * 4) || cudaMalloc(&b, count * 4) || cudaStreamCreate(&stream, 1)) {
    fprintf(stderr, "dropin_host_cost: the stand-in runtime failed\n");
    return 1;
  }
  constexpr int kFloat = 7, kSum = 0;
  const std::vector<Case> cases = {
      {"allreduce", [&](const Nccl& n, Comm c) { return n.allReduce(a, b, count, kFloat, kSum, c, stream); }},
      {"allreduce_inplace", [&](const Nccl& n, Comm c) { return n.allReduce(a, a, count, kFloat, kSum, c, stream); }},
      {"broadcast", [&](const Nccl& n, Comm c) { return n.broadcast(a, b, count, kFloat, 0, c, stream); }},
      {"reduce", [&](const Nccl& n, Comm c) { return n.reduce(a, b, count, kFloat, kSum, 0, c, stream); }},
      {"allgather", [&](const Nccl& n, Comm c) { return n.allGather(a, b, count, kFloat, c, stream); }},
      {"reducescatter", [&](const Nccl& n, Comm c) { return n.reduceScatter(a, b, count, kFloat, kSum, c, stream); }},
      // As torch's send/recv: each inside a group of its own, and a pair.
      {"send_in_group",
       [&](const Nccl& n, Comm c) {
         int r = n.groupStart();
         r |= n.send(a, count, kFloat, 0, c, stream);
         return r | n.groupEnd();
       }},
      {"sendrecv_in_group",
       [&](const Nccl& n, Comm c) {
         int r = n.groupStart();
         r |= n.send(a, count, kFloat, 0, c, stream);
         r |= n.recv(b, count, kFloat, 0, c, stream);
         return r | n.groupEnd();
       }},
  };

  bool ok = true;
  const int nc = counters.n();
  const size_t ns = sides.size();
  auto runtimeCalls = [&](const Side& s) {
    unsigned long long n = 0;
    for (int q = 0; q < nc; ++q) n += s.delta[q];
    return static_cast<double>(n) / iters;
  };
  for (const Case& k : cases) {
    for (Side& s : sides) s.bestNs = 1e300;
    for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
      for (size_t j = 0; j < ns; ++j) {
        Side& s = sides[(r % 2 == 0) ? j : ns - 1 - j];  // the order turns every round
        const std::vector<unsigned long long> before = counters.read();
        const double t0 = nowNs();
        int rc = 0;
        for (int i = 0; i < iters; ++i) rc |= k.run(s.nccl, s.comm);
        const double t = (nowNs() - t0) / iters;
        if (rc != 0) {
          fprintf(stderr, "dropin_host_cost: %s through %s failed: %s\n", k.name, s.what, s.nccl.getLastError(s.comm));
          return 1;
        }
        if (r > 0) s.bestNs = std::min(s.bestNs, t);
        if (r == 1) {
          s.delta = counters.read();
          for (size_t q = 0; q < s.delta.size(); ++q) s.delta[q] -= before[q];
        }
      }
    }
    const Side &vendor = sides[0], &hetccl = sides[1];
    const double perCall = runtimeCalls(hetccl);
    printf("ratio dropin_host_cost %s vendor_ns=%.1f dropin_ns=%.1f added_ns=%.1f runtime_calls=%.2f vendor_calls=%.2f",
           k.name, vendor.bestNs, hetccl.bestNs, hetccl.bestNs - vendor.bestNs, perCall,
           static_cast<double>(hetccl.delta[nc]) / iters);
    if (ns > 2) {
      const Side& base = sides[2];
      printf(
          " baseline_ns=%.1f baseline_added_ns=%.1f added/baseline_added=%.3f baseline_runtime_calls=%.2f "
          "baseline_vendor_calls=%.2f",
          base.bestNs, base.bestNs - vendor.bestNs, (hetccl.bestNs - vendor.bestNs) / (base.bestNs - vendor.bestNs),
          runtimeCalls(base), static_cast<double>(base.delta[nc]) / iters);
    }
    printf("\n");
    if (perCall > 0) {
      printf("runtime_calls %s", k.name);
      for (int q = 0; q < nc; ++q)
        if (hetccl.delta[q]) printf(" %s=%.2f", counters.name(q), static_cast<double>(hetccl.delta[q]) / iters);
      printf("\n");
    }
    if (maxRuntimeCalls >= 0 && perCall > static_cast<double>(maxRuntimeCalls)) {
      printf("dropin_host_cost: %s makes %.2f runtime calls a call, more than --max-runtime-calls %ld\n", k.name,
             perCall, maxRuntimeCalls);
      ok = false;
    }
    if (noExtraVendorCalls && hetccl.delta[nc] > vendor.delta[nc]) {
      printf("dropin_host_cost: %s makes %.2f vendor calls a call, more than the %.2f the application makes\n", k.name,
             static_cast<double>(hetccl.delta[nc]) / iters, static_cast<double>(vendor.delta[nc]) / iters);
      ok = false;
    }
    fflush(stdout);
  }
  for (Side& s : sides) s.nccl.commDestroy(s.comm);
  return ok ? 0 : 1;
}
