/* A program built against an installed hetccl (find_package or pkg-config):
 * one host rank, one AllReduce, the result checked. */
#include <hetccl/hetccl.h>
#include <stdio.h>

int main(void) {
  hetcclUniqueId id;
  hetcclComm_t comm = NULL;
  float x[4] = {1, 2, 3, 4};
  if (hetcclGetUniqueId(&id) != hetcclSuccess || hetcclCommInitRank(&comm, 1, id, 0) != hetcclSuccess) {
    fprintf(stderr, "consumer: init failed: %s\n", hetcclGetLastError(NULL));
    return 1;
  }
  if (hetcclAllReduce(x, x, 4, hetcclFloat32, hetcclSum, comm, NULL) != hetcclSuccess || x[3] != 4.0f) {
    fprintf(stderr, "consumer: AllReduce failed: %s\n", hetcclGetLastError(comm));
    return 1;
  }
  hetcclCommDestroy(comm);
  printf("consumer: ok\n");
  return 0;
}
