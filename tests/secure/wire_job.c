/* One rank of the wire-capture test (check_wire.py starts four with the
 * torchrun-style environment): an AllGather of BYTES bytes per rank, each
 * rank's part the text of $MARKER repeated (so the payload crosses the wire
 * verbatim), results checked, then "done" on stdout.
 *
 *   wire_job BYTES
 * Exit status: 0 right results, 1 wrong results, 2 usage, 3 a library error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetccl/hetccl.h"

static void fill(char* p, size_t n, const char* marker, int rank) {
  char unit[256];
  int len = snprintf(unit, sizeof(unit), "%s-rank%d-", marker, rank);
  for (size_t i = 0; i < n; ++i) p[i] = unit[i % (size_t)len];
}

int main(int argc, char** argv) {
  const char* marker = getenv("MARKER");
  if (argc < 2 || !marker || strlen(marker) > 200) {
    fprintf(stderr, "usage: MARKER=text wire_job BYTES\n");
    return 2;
  }
  const size_t bytes = (size_t)atol(argv[1]);
  hetcclComm_t comm;
  if (hetcclCommInitFromEnv(&comm, NULL) != hetcclSuccess) {
    fprintf(stderr, "init: %s\n", hetcclGetLastError(NULL));
    return 3;
  }
  int rank, nranks;
  hetcclCommUserRank(comm, &rank);
  hetcclCommCount(comm, &nranks);
  char* mine = malloc(bytes);
  char* all = malloc(bytes * (size_t)nranks);
  char* want = malloc(bytes);
  fill(mine, bytes, marker, rank);
  if (hetcclAllGather(mine, all, bytes, hetcclUint8, comm, NULL) != hetcclSuccess) {
    fprintf(stderr, "allgather: %s\n", hetcclGetLastError(comm));
    return 3;
  }
  int bad = 0;
  for (int r = 0; r < nranks; ++r) {
    fill(want, bytes, marker, r);
    if (memcmp(all + (size_t)r * bytes, want, bytes) != 0) bad = 1;
  }
  hetcclCommInfo_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  hetcclCommGetInfo(comm, &info);
  printf("done encrypted_peers=%d plain_peers=%d\n", info.encryptedPeers, info.plainPeers);
  fflush(stdout);
  hetcclCommDestroy(comm);
  free(mine);
  free(all);
  free(want);
  return bad;
}
