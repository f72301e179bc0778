// fault_netns_rank: one rank of the network-partition test (netns_partition.sh).
//
// Joins the job with hetcclCommInitFromEnv (torchrun variables), then runs
// checked AllReduces (256K floats) until one fails, and prints what happened
// as lines the driver parses, with CLOCK_MONOTONIC seconds:
//   INIT <code> <t>            after init
//   ITER <n> <t>               every 10 completed AllReduces
//   WRONG <n> <index> <value>  a wrong result (never expected)
//   FAIL <n> <code> <t> <hetcclGetLastError text>
//   ABORT <code> <seconds>
// Exit 0 when an AllReduce failed and the abort worked; 2 when init failed;
// 3 when no call failed within --max-seconds; 4 after a wrong result.
// `fault_netns_rank --now` prints CLOCK_MONOTONIC seconds (for the driver).
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hetccl/hetccl.h"

namespace {
double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--now") == 0) {
    printf("%.6f\n", now());
    return 0;
  }
  double maxSeconds = 60;
  if (argc > 2 && strcmp(argv[1], "--max-seconds") == 0) maxSeconds = atof(argv[2]);
  setvbuf(stdout, nullptr, _IOLBF, 0);

  hetcclComm_t comm = nullptr;
  hetcclResult_t r = hetcclCommInitFromEnv(&comm, nullptr);
  printf("INIT %d %.6f\n", r, now());
  if (r != hetcclSuccess) {
    printf("INITERR %s\n", hetcclGetLastError(nullptr));
    return 2;
  }
  int rank = 0, nranks = 0;
  hetcclCommUserRank(comm, &rank);
  hetcclCommCount(comm, &nranks);
  const size_t n = 256 * 1024;
  std::vector<float> send(n), recv(n);
  for (size_t i = 0; i < n; ++i) send[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 5));
  const double start = now();
  for (long it = 0;; ++it) {
    if (now() - start > maxSeconds) {
      printf("NOFAIL %ld\n", it);
      hetcclCommDestroy(comm);
      return 3;
    }
    r = hetcclAllReduce(send.data(), recv.data(), n, hetcclFloat32, hetcclSum, comm, nullptr);
    if (r != hetcclSuccess) {
      double t = now();
      printf("FAIL %ld %d %.6f %s\n", it, r, t, hetcclGetLastError(comm));
      break;
    }
    for (size_t i = 0; i < n; i += 4099) {
      float want = static_cast<float>(nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 5));
      if (recv[i] != want) {
        printf("WRONG %ld %zu %f\n", it, i, recv[i]);
        return 4;
      }
    }
    if ((it + 1) % 10 == 0) printf("ITER %ld %.6f\n", it + 1, now());
  }
  double t0 = now();
  r = hetcclCommAbort(comm);
  printf("ABORT %d %.3f\n", r, now() - t0);
  return r == hetcclSuccess ? 0 : 5;
}
