/* Open MPI peer for bench/allreduce_vs_peers.sh: float32 sum AllReduce,
 * out-of-place, timed the way nccl-tests times it (warmup, barrier, n timed
 * calls, time per call), reporting the slowest rank's time.
 *
 *   mpirun -np 4 mpi_allreduce --sizes 8:20:5,4194304:20:5 [--json FILE]
 *
 * Each --sizes entry is BYTES:ITERS:WARMUP. BYTES is rounded down to a
 * multiple of sizeof(float). algbw = bytes/time, busbw = algbw*2(n-1)/n,
 * GB = 1e9. #wrong counts result elements that differ from the exact sum
 * (inputs are small integers, so float sums are exact). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct size_spec {
  long long bytes;
  int iters;
  int warmup;
};

static int parse_sizes(const char* arg, struct size_spec** out) {
  int cap = 1;
  for (const char* p = arg; *p; p++) cap += (*p == ',');
  struct size_spec* specs = calloc((size_t)cap, sizeof *specs);
  int n = 0;
  const char* p = arg;
  while (*p) {
    long long b;
    int it, wu, used = 0;
    if (sscanf(p, "%lld:%d:%d%n", &b, &it, &wu, &used) != 3 || b < 4 || it < 1 || wu < 0) {
      free(specs);
      return -1;
    }
    specs[n].bytes = b - b % (long long)sizeof(float);
    specs[n].iters = it;
    specs[n].warmup = wu;
    n++;
    p += used;
    if (*p == ',')
      p++;
    else if (*p) {
      free(specs);
      return -1;
    }
  }
  *out = specs;
  return n;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  const char *sizes_arg = NULL, *json_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
      sizes_arg = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown argument '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  struct size_spec* specs = NULL;
  int nspecs = sizes_arg ? parse_sizes(sizes_arg, &specs) : -1;
  if (nspecs <= 0) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce: need --sizes BYTES:ITERS:WARMUP[,...]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  long long max_bytes = 0;
  for (int s = 0; s < nspecs; s++)
    if (specs[s].bytes > max_bytes) max_bytes = specs[s].bytes;
  float* send = malloc((size_t)max_bytes);
  float* recv = malloc((size_t)max_bytes);
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce: rank %d cannot allocate %lld bytes\n", rank, 2 * max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  FILE* json = NULL;
  if (rank == 0) {
    if (json_path && !(json = fopen(json_path, "w"))) {
      fprintf(stderr, "mpi_allreduce: cannot write %s\n", json_path);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int len;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &len);
    char* nl = strchr(version, '\n');
    if (nl) *nl = '\0';
    printf("# mpi_allreduce: %d ranks, float sum, out-of-place; %s\n", nranks, version);
    printf("# %12s %12s %6s %6s %12s %10s %10s %8s\n", "size(B)", "count", "iters", "warm", "time(us)", "algbw",
           "busbw", "#wrong");
    if (json) fprintf(json, "{\"op\":\"allreduce\",\"dtype\":\"float32\",\"nranks\":%d,\"rows\":[", nranks);
  }

  double busbw_sum = 0;
  for (int s = 0; s < nspecs; s++) {
    const long long bytes = specs[s].bytes;
    const int count = (int)(bytes / (long long)sizeof(float));
    for (int i = 0; i < count; i++) {
      send[i] = (float)((rank + i) % 7);
      recv[i] = -1.0f;
    }

    for (int i = 0; i < specs[s].warmup; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < specs[s].iters; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double per_call = (MPI_Wtime() - t0) / specs[s].iters;
    double slowest;
    MPI_Reduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    float expect[7] = {0};
    for (int k = 0; k < 7; k++)
      for (int r = 0; r < nranks; r++) expect[k] += (float)((r + k) % 7);
    long long wrong = 0;
    for (int i = 0; i < count; i++) wrong += recv[i] != expect[i % 7];
    long long wrong_total = 0;
    MPI_Reduce(&wrong, &wrong_total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
      const double time_us = slowest * 1e6;
      const double algbw = (double)bytes / slowest / 1e9;
      const double busbw = algbw * 2.0 * (nranks - 1) / nranks;
      busbw_sum += busbw;
      printf("  %12lld %12d %6d %6d %12.2f %10.4f %10.4f %8lld\n", bytes, count, specs[s].iters, specs[s].warmup,
             time_us, algbw, busbw, wrong_total);
      fflush(stdout);
      if (json)
        fprintf(json,
                "%s{\"bytes\":%lld,\"count\":%d,\"iters\":%d,\"warmup\":%d,"
                "\"oop\":{\"time_us\":%.3f,\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%lld}}",
                s ? "," : "", bytes, count, specs[s].iters, specs[s].warmup, time_us, algbw, busbw, wrong_total);
    }
  }

  if (rank == 0) {
    printf("# Avg bus bandwidth : %.4f\n", busbw_sum / nspecs);
    if (json) {
      fprintf(json, "],\"avg_busbw\":%.6f}\n", busbw_sum / nspecs);
      fclose(json);
    }
  }
  free(send);
  free(recv);
  free(specs);
  MPI_Finalize();
  return 0;
}
