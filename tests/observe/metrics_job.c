/* One rank of the observability tests' job (tests/observe/job.py starts
 * them with the torchrun-style environment and HETCCL_GROUP): CALLS
 * AllReduces of COUNT floats (results checked), then one line "done <n>"
 * on stdout, then it keeps the communicator alive, issuing nothing, until
 * a line arrives on stdin (the test has read the endpoints) or stdin closes.
 * With LOOP_S > 0 it instead keeps calling AllReduce for about that long (a
 * live job for the dashboard and hetccl-top), then waits the same way; the
 * ranks agree when to stop (an int32 max AllReduce every 16 calls), so all
 * make the same calls. With MISMATCH_AT_END=1 in the environment the ranks
 * end with a Broadcast whose root the last rank names differently (the
 * communicator fails) and an AllReduce that must then fail on every rank;
 * the line is "done <n> failed" and the communicator stays alive, failed.
 *
 *   metrics_job CALLS COUNT [LOOP_S]
 * Exit status: 0 right results, 1 wrong results, 2 usage, 3 a library error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hetccl/hetccl.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: metrics_job CALLS COUNT [LOOP_S]\n");
    return 2;
  }
  const long calls = atol(argv[1]);
  const size_t count = (size_t)atol(argv[2]);
  const double loop_s = argc > 3 ? atof(argv[3]) : 0;
  hetcclComm_t comm;
  if (hetcclCommInitFromEnv(&comm, NULL) != hetcclSuccess) {
    fprintf(stderr, "init: %s\n", hetcclGetLastError(NULL));
    return 3;
  }
  int rank, nranks;
  hetcclCommUserRank(comm, &rank);
  hetcclCommCount(comm, &nranks);
  float* buf = malloc(count * sizeof(float));
  long n = 0;
  const double t0 = now_s();
  for (;; ++n) {
    if (n >= calls && loop_s <= 0) break;
    if (n >= calls && n % 16 == 0) {
      int32_t stop = now_s() - t0 >= loop_s;
      if (hetcclAllReduce(&stop, &stop, 1, hetcclInt32, hetcclMax, comm, NULL) != hetcclSuccess) {
        fprintf(stderr, "allreduce: %s\n", hetcclGetLastError(comm));
        return 3;
      }
      if (stop) break;
    }
    for (size_t i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
    if (hetcclAllReduce(buf, buf, count, hetcclFloat32, hetcclSum, comm, NULL) != hetcclSuccess) {
      fprintf(stderr, "allreduce: %s\n", hetcclGetLastError(comm));
      return 3;
    }
    const float want = (float)nranks * (float)(nranks + 1) / 2.0f;
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != want) {
        fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, buf[i], want);
        return 1;
      }
  }
  const char* mismatch = getenv("MISMATCH_AT_END");
  if (mismatch && atoi(mismatch)) {
    const int root = rank == nranks - 1 ? 1 : 0;
    hetcclResult_t r = hetcclBroadcast(buf, buf, count, hetcclFloat32, root, comm, NULL);
    hetcclResult_t after = hetcclAllReduce(buf, buf, count, hetcclFloat32, hetcclSum, comm, NULL);
    if (after == hetcclSuccess) {
      fprintf(stderr, "rank %d: the AllReduce after a mismatched Broadcast (%d) succeeded\n", rank, (int)r);
      return 1;
    }
    printf("done %ld failed\n", n);
    fflush(stdout);
    char wait[16];
    (void)!fgets(wait, sizeof(wait), stdin);
    free(buf);
    return hetcclCommAbort(comm) == hetcclSuccess ? 0 : 3;
  }
  printf("done %ld\n", n);
  fflush(stdout);
  char line[16];
  (void)!fgets(line, sizeof(line), stdin);
  free(buf);
  return hetcclCommDestroy(comm) == hetcclSuccess ? 0 : 3;
}
