/* An NCCL 2.28.9 whose calls return at once, for hetccl-dropin-host-cost
 * (bench/dropin_host_cost.cc): the benchmark calls it directly and through
 * hetccl's drop-in (which loads it as HETCCL_NCCL_LIB), so that the
 * difference is the drop-in's own host time. A real NCCL takes about 5 us
 * a call, which hides a cost of 0.2 us in noise; the emulated GPU's group
 * library is slower still.
 *
 * Communicators are of any size and rank and move nothing. Every call is
 * counted (standinNcclCalls), so the benchmark also reports how many vendor
 * calls the drop-in makes for one of the application's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { kSuccess = 0, kInvalidArgument = 4 };

static unsigned long long calls;
static void count(void) { __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED); }

unsigned long long standinNcclCalls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }

struct comm {
  int nranks, rank;
};
typedef struct {
  char internal[128];
} uniqueId;

int ncclGetVersion(int* v) {
  if (!v) return kInvalidArgument;
  *v = 22809;
  return kSuccess;
}
int ncclGetUniqueId(uniqueId* id) {
  memset(id, 0, sizeof(*id));
  strcpy(id->internal, "standin");
  return kSuccess;
}
static int init(struct comm** c, int nranks, int rank) {
  if (!c || nranks < 1 || rank < 0 || rank >= nranks) return kInvalidArgument;
  *c = malloc(sizeof(struct comm));
  (*c)->nranks = nranks;
  (*c)->rank = rank;
  return kSuccess;
}
int ncclCommInitRank(struct comm** c, int nranks, uniqueId id, int rank) {
  (void)id;
  return init(c, nranks, rank);
}
int ncclCommInitRankConfig(struct comm** c, int nranks, uniqueId id, int rank, void* config) {
  (void)id, (void)config;
  return init(c, nranks, rank);
}
int ncclCommDestroy(struct comm* c) {
  free(c);
  return kSuccess;
}
int ncclCommAbort(struct comm* c) {
  free(c);
  return kSuccess;
}
int ncclCommGetAsyncError(struct comm* c, int* e) {
  (void)c;
  count();
  *e = kSuccess;
  return kSuccess;
}
const char* ncclGetErrorString(int r) { return r == kSuccess ? "no error" : "stand-in NCCL error"; }
const char* ncclGetLastError(struct comm* c) {
  (void)c;
  return "";
}

/* The data calls: checked as NCCL checks its cheap arguments, nothing moved. */
#define CALL(c) \
  count();      \
  return (c) ? kSuccess : kInvalidArgument

int ncclAllReduce(const void* s, void* r, size_t n, int dt, int op, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)op, (void)st;
  CALL(c);
}
int ncclReduceScatter(const void* s, void* r, size_t n, int dt, int op, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)op, (void)st;
  CALL(c);
}
int ncclAllGather(const void* s, void* r, size_t n, int dt, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)st;
  CALL(c);
}
int ncclBroadcast(const void* s, void* r, size_t n, int dt, int root, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)root, (void)st;
  CALL(c);
}
int ncclReduce(const void* s, void* r, size_t n, int dt, int op, int root, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)op, (void)root, (void)st;
  CALL(c);
}
int ncclAlltoAll(const void* s, void* r, size_t n, int dt, struct comm* c, void* st) {
  (void)s, (void)r, (void)n, (void)dt, (void)st;
  CALL(c);
}
int ncclSend(const void* s, size_t n, int dt, int peer, struct comm* c, void* st) {
  (void)s, (void)n, (void)dt, (void)st;
  CALL(c && peer >= 0 && peer < c->nranks);
}
int ncclRecv(void* r, size_t n, int dt, int peer, struct comm* c, void* st) {
  (void)r, (void)n, (void)dt, (void)st;
  CALL(c && peer >= 0 && peer < c->nranks);
}
int ncclGroupStart(void) {
  count();
  return kSuccess;
}
int ncclGroupEnd(void) {
  count();
  return kSuccess;
}
int ncclRedOpCreatePreMulSum(int* op, void* scalar, int dt, int residence, struct comm* c) {
  (void)scalar, (void)dt, (void)residence;
  count();
  *op = 5;
  return c ? kSuccess : kInvalidArgument;
}
int ncclRedOpDestroy(int op, struct comm* c) {
  (void)op;
  CALL(c);
}
