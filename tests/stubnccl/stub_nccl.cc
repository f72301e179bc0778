// A stand-in vendor library with NCCL's ABI, for CPU tests of what hetccl
// does with a real NCCL: the nccl group backend, and the drop-in in front of
// a vendor library. It runs each collective on a host-memory hetccl
// communicator of its own (libhetccl.so, built-in host backend), so its
// results are real. Like NCCL 2.28 it exports its API with default
// visibility and calls some of it through its own PLT: every collective
// first asks ncclCommGetAsyncError and ncclGetVersion, ncclBcast calls
// ncclBroadcast, ncclCommInitRank calls ncclCommInitRankConfig, and
// ncclCommDestroy calls ncclCommGetAsyncError. A communicator handle it did
// not make is refused (ncclInvalidUsage), as NCCL refuses one: so a library
// in front of it that captured those PLT calls makes every call fail.
//
// Streams must be NULL (host memory, calls complete before they return).
// stubSelfCalls() counts the PLT calls that reached this library with one of
// its own handles, so tests can tell that they came home.
// HETCCL_STUB_INIT_DELAY_S=N: a non-blocking init stays in progress for N
// seconds (a vendor init that waits long), until ncclCommAbort ends it.
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "hetccl/hetccl.h"

namespace {

using ncclResult_t = int;
constexpr uint64_t kMagic = 0x5354554253434c4eull;  // "NLCSBUTS"

struct StubComm {
  uint64_t magic = kMagic;
  hetcclComm_t inner = nullptr;
  int blocking = 1;
  std::chrono::steady_clock::time_point readyAt{};  // non-blocking init: in progress until then
};

std::atomic<long> selfCalls{0};
thread_local std::string lastError;

ncclResult_t fail(ncclResult_t r, const std::string& what) {
  lastError = what;
  return r;
}

bool ours(const void* comm) { return comm && static_cast<const StubComm*>(comm)->magic == kMagic; }

struct ConfigHead {
  size_t size;
  unsigned magic, version;
  int blocking;
};

}  // namespace

extern "C" {

long stubSelfCalls() { return selfCalls.load(); }

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(4, "ncclGetVersion: version is NULL");
  *version = 22809;
  return 0;
}

const char* ncclGetErrorString(ncclResult_t r) { return hetcclGetErrorString(static_cast<hetcclResult_t>(r)); }
const char* ncclGetLastError(void*) { return lastError.c_str(); }

ncclResult_t ncclGetUniqueId(void* id) { return hetcclGetUniqueId(static_cast<hetcclUniqueId*>(id)); }

ncclResult_t ncclCommGetAsyncError(void* comm, ncclResult_t* err) {
  if (!ours(comm)) return fail(5, "ncclCommGetAsyncError: not a communicator of this library");
  selfCalls.fetch_add(1);
  auto* c = static_cast<StubComm*>(comm);
  hetcclResult_t e = hetcclSuccess;
  hetcclResult_t r = hetcclCommGetAsyncError(c->inner, &e);
  if (r != hetcclSuccess) return r;
  if (e == hetcclSuccess && std::chrono::steady_clock::now() < c->readyAt) e = hetcclInProgress;
  *err = e;
  return 0;
}

ncclResult_t ncclCommInitRankConfig(void** comm, int nranks, hetcclUniqueId id, int rank, void* config) {
  auto* c = new StubComm;
  if (config) {
    ConfigHead h;
    memcpy(&h, config, sizeof(h));
    if (h.magic != 0xcafebeef) {
      delete c;
      return fail(4, "ncclCommInitRankConfig: bad config magic");
    }
    if (h.blocking != INT_MIN) c->blocking = h.blocking;
  }
  if (!c->blocking)
    if (const char* d = getenv("HETCCL_STUB_INIT_DELAY_S"))
      c->readyAt = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         std::chrono::duration<double>(atof(d)));
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.device = "host";
  cfg.backend = "host";
  cfg.groupName = "stub";
  cfg.blocking = c->blocking;
  hetcclResult_t r = hetcclCommInitRankConfig(&c->inner, nranks, id, rank, &cfg);
  if (r != hetcclSuccess && r != hetcclInProgress) {
    std::string msg = hetcclGetLastError(nullptr);
    delete c;
    return fail(r, "ncclCommInitRankConfig: " + msg);
  }
  *comm = c;
  return r;
}

ncclResult_t ncclCommInitRank(void** comm, int nranks, hetcclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommDestroy(void* comm) {
  ncclResult_t e = 0;
  ncclResult_t r = ncclCommGetAsyncError(comm, &e);  // through the PLT, as NCCL's destroy checks its comm
  if (r != 0) return r;
  auto* c = static_cast<StubComm*>(comm);
  r = hetcclCommDestroy(c->inner);
  c->magic = 0;
  delete c;
  return r;
}

ncclResult_t ncclCommAbort(void* comm) {
  if (!ours(comm)) return fail(5, "ncclCommAbort: not a communicator of this library");
  auto* c = static_cast<StubComm*>(comm);
  hetcclCommAbort(c->inner);
  c->magic = 0;
  delete c;
  return 0;
}

ncclResult_t ncclCommCount(void* comm, int* n) {
  if (!ours(comm)) return fail(5, "ncclCommCount: not a communicator of this library");
  return hetcclCommCount(static_cast<StubComm*>(comm)->inner, n);
}

ncclResult_t ncclCommUserRank(void* comm, int* r) {
  if (!ours(comm)) return fail(5, "ncclCommUserRank: not a communicator of this library");
  return hetcclCommUserRank(static_cast<StubComm*>(comm)->inner, r);
}

}  // extern "C"

namespace {

// What NCCL's ncclEnqueueCheck does first: the communicator's async error
// and the library version, both through the PLT.
ncclResult_t enqueueCheck(void* comm, void* stream, hetcclComm_t* inner) {
  ncclResult_t e = 0;
  ncclResult_t r = ncclCommGetAsyncError(comm, &e);
  if (r != 0) return r;
  if (e != 0 && e != 7) return fail(e, "an earlier call failed");
  int v = 0;
  if (ncclGetVersion(&v) != 0 || v != 22809) return fail(3, "ncclGetVersion did not reach the stub");
  selfCalls.fetch_add(1);
  if (stream) return fail(4, "the stub vendor library runs on host memory: stream must be NULL");
  *inner = static_cast<StubComm*>(comm)->inner;
  return 0;
}

ncclResult_t result(hetcclResult_t r, hetcclComm_t inner) {
  if (r != hetcclSuccess && r != hetcclInProgress) lastError = hetcclGetLastError(inner);
  return r;
}

hetcclDataType_t dt(int x) { return static_cast<hetcclDataType_t>(x); }
hetcclRedOp_t op(int x) { return static_cast<hetcclRedOp_t>(x); }

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int t, int o, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclAllReduce(s, r, n, dt(t), op(o), in, nullptr), in);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclBroadcast(s, r, n, dt(t), root, in, nullptr), in);
}
ncclResult_t ncclBcast(void* b, size_t n, int t, int root, void* comm, void* st) {
  return ncclBroadcast(b, b, n, t, root, comm, st);  // through the PLT, as NCCL's
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, int t, int o, int root, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclReduce(s, r, n, dt(t), op(o), root, in, nullptr), in);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int t, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclAllGather(s, r, n, dt(t), in, nullptr), in);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int t, int o, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclReduceScatter(s, r, n, dt(t), op(o), in, nullptr), in);
}
ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, int t, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclAlltoAll(s, r, n, dt(t), in, nullptr), in);
}
ncclResult_t ncclSend(const void* s, size_t n, int t, int peer, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclSend(s, n, dt(t), peer, in, nullptr), in);
}
ncclResult_t ncclRecv(void* r, size_t n, int t, int peer, void* comm, void* st) {
  hetcclComm_t in;
  if (ncclResult_t c = enqueueCheck(comm, st, &in)) return c;
  return result(hetcclRecv(r, n, dt(t), peer, in, nullptr), in);
}
ncclResult_t ncclGroupStart() { return hetcclGroupStart(); }
ncclResult_t ncclGroupEnd() { return result(hetcclGroupEnd(), nullptr); }

// Device residence on host memory: read when each call runs, as NCCL reads
// a device scalar when its kernel runs.
ncclResult_t ncclRedOpCreatePreMulSum(int* o, void* scalar, int t, int residence, void* comm) {
  if (!ours(comm)) return fail(5, "ncclRedOpCreatePreMulSum: not a communicator of this library");
  hetcclComm_t in = static_cast<StubComm*>(comm)->inner;
  return result(hetcclRedOpCreatePreMulSum(reinterpret_cast<hetcclRedOp_t*>(o), scalar, dt(t),
                                           static_cast<hetcclScalarResidence_t>(residence), in),
                in);
}
ncclResult_t ncclRedOpDestroy(int o, void* comm) {
  if (!ours(comm)) return fail(5, "ncclRedOpDestroy: not a communicator of this library");
  hetcclComm_t in = static_cast<StubComm*>(comm)->inner;
  return result(hetcclRedOpDestroy(op(o), in), in);
}

// Registration: handles that deregistration checks are its own.
ncclResult_t ncclCommRegister(void* comm, void* buff, size_t, void** handle) {
  if (!ours(comm)) return fail(5, "ncclCommRegister: not a communicator of this library");
  *handle = new const void*(buff);
  return 0;
}
ncclResult_t ncclCommDeregister(void* comm, void* handle) {
  ncclResult_t e = 0;
  if (ncclResult_t r = ncclCommGetAsyncError(comm, &e)) return r;
  delete static_cast<const void**>(handle);
  return 0;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  int v = 0;
  if (ncclGetVersion(&v) != 0 || v != 22809) return fail(3, "ncclGetVersion did not reach the stub");
  *ptr = new char[size ? size : 1];
  return 0;
}
ncclResult_t ncclMemFree(void* ptr) {
  delete[] static_cast<char*>(ptr);
  return 0;
}

}  // extern "C"
