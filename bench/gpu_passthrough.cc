// One-group pass-through benchmark (one NVIDIA GPU): the same float32 sum
// AllReduce on the same device buffers and stream, through NCCL directly
// (ncclCommInitAll on one GPU) and through a one-rank hetccl CUDA
// communicator (which hands the call to that NCCL library), alternating
// in one process. A ratio near 1 means hetccl adds no copies and no
// synchronisation of its own on this path. Memory and the stream come from
// hetccl's device helpers (hetcclDeviceAlloc...), so the CUDA runtime is
// found the one way hetccl finds it; NCCL, the peer, is loaded here.
//
//   hetccl-gpu-passthrough [iters]
// Prints: passthrough <bytes> nccl_us=<t> hetccl_us=<t> hetccl/nccl=<ratio>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <hetccl/hetccl.h>

namespace {

template <typename F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "gpu_passthrough: missing %s\n", name);
    exit(3);
  }
  return reinterpret_cast<F>(p);
}

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 50;
  const char* ncclPath = getenv("HETCCL_NCCL_LIB");
  void* nccl = dlopen(ncclPath && *ncclPath ? ncclPath : "libnccl.so.2", RTLD_NOW);
  if (!nccl) {
    fprintf(stderr, "gpu_passthrough: needs libnccl.so.2: %s\n", dlerror());
    return 3;
  }
  auto ncclCommInitAll = sym<int (*)(void**, int, const int*)>(nccl, "ncclCommInitAll");
  auto ncclAllReduce = sym<int (*)(const void*, void*, size_t, int, int, void*, void*)>(nccl, "ncclAllReduce");
  auto must = [](hetcclResult_t r, const char* what) {
    if (r != hetcclSuccess) {
      fprintf(stderr, "gpu_passthrough: %s failed: %s\n", what, hetcclGetLastError(nullptr));
      exit(3);
    }
  };
  must(hetcclDeviceSet("cuda", 0), "hetcclDeviceSet");
  hetcclStream_t stream = nullptr;
  must(hetcclStreamCreate("cuda", &stream), "hetcclStreamCreate");
  auto streamSync = [&](hetcclStream_t s) { must(hetcclStreamSynchronize("cuda", s), "hetcclStreamSynchronize"); };
  void* ncclComm = nullptr;
  int dev0 = 0;
  if (ncclCommInitAll(&ncclComm, 1, &dev0) != 0) {
    fprintf(stderr, "gpu_passthrough: ncclCommInitAll failed\n");
    return 3;
  }
  hetcclUniqueId id;
  hetcclGetUniqueId(&id);
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.device = "cuda";
  hetcclComm_t comm = nullptr;
  if (hetcclCommInitRankConfig(&comm, 1, id, 0, &cfg) != hetcclSuccess) {
    fprintf(stderr, "gpu_passthrough: hetccl init failed: %s\n", hetcclGetLastError(nullptr));
    return 3;
  }
  const size_t maxBytes = size_t{256} << 20;
  void *a = nullptr, *b = nullptr;
  must(hetcclDeviceAlloc("cuda", &a, maxBytes), "hetcclDeviceAlloc");
  must(hetcclDeviceAlloc("cuda", &b, maxBytes), "hetcclDeviceAlloc");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 8) {
    size_t count = bytes / 4;
    double t[2] = {0, 0};
    for (int round = 0; round < 3; ++round) {
      for (int which = 0; which < 2; ++which) {
        streamSync(stream);
        double t0 = seconds();
        for (int i = 0; i < iters; ++i) {
          int r = which == 0 ? ncclAllReduce(a, b, count, 7, 0, ncclComm, stream)
                             : static_cast<int>(hetcclAllReduce(a, b, count, hetcclFloat32, hetcclSum, comm, stream));
          if (r != 0) {
            fprintf(stderr, "gpu_passthrough: %s AllReduce failed (%d): %s\n", which ? "hetccl" : "nccl", r,
                    which ? hetcclGetLastError(comm) : "");
            return 3;
          }
        }
        streamSync(stream);
        if (round > 0) t[which] += (seconds() - t0) / iters;  // round 0 warms up
      }
    }
    printf("passthrough %zu nccl_us=%.2f hetccl_us=%.2f hetccl/nccl=%.3f%s\n", bytes, t[0] / 2 * 1e6, t[1] / 2 * 1e6,
           t[1] / t[0], t[1] <= 1.05 * t[0] ? "" : "  above 1.05x");
  }
  // Where the host time of a small call goes: enqueue-only loops (no
  // synchronisation inside), each the median of 5 rounds of `iters` calls.
  auto ncclGroupStart = sym<int (*)()>(nccl, "ncclGroupStart");
  auto ncclGroupEnd = sym<int (*)()>(nccl, "ncclGroupEnd");
  auto perCall = [&](auto&& call) {
    double best[5];
    for (double& t : best) {
      streamSync(stream);
      double t0 = seconds();
      for (int i = 0; i < iters * 20; ++i) call();
      t = (seconds() - t0) / (iters * 20) * 1e6;
      streamSync(stream);
    }
    std::sort(best, best + 5);
    return best[2];
  };
  const double hostNccl = perCall([&] { ncclAllReduce(a, b, 2, 7, 0, ncclComm, stream); });
  const double hostGroup = perCall([&] {
    ncclGroupStart();
    ncclAllReduce(a, b, 2, 7, 0, ncclComm, stream);
    ncclGroupEnd();
  });
  const double hostHetccl = perCall([&] { hetcclAllReduce(a, b, 2, hetcclFloat32, hetcclSum, comm, stream); });
  // The target: within 1.05x of NCCL's own host time a call.
  printf("host_us nccl=%.2f nccl_in_group=%.2f hetccl=%.2f hetccl/nccl=%.3f added_us=%.2f%s\n", hostNccl, hostGroup,
         hostHetccl, hostHetccl / hostNccl, hostHetccl - hostNccl,
         hostHetccl <= 1.05 * hostNccl ? "" : "  above 1.05x");
  hetcclCommDestroy(comm);
  hetcclDeviceFree("cuda", a);
  hetcclDeviceFree("cuda", b);
  hetcclStreamDestroy("cuda", stream);
  return 0;
}
