// pair_relay_rank: one rank of the send/recv checks across hosts in
// check_emu_border.py (GPU ranks of different groups on different hosts:
// border/pair_relay.h). Joins with hetcclCommInitFromEnv (torchrun
// variables; HETCCL_DEVICE names the device kind), buffers in device
// memory, and prints one line the driver parses:
//
//   pair_relay_rank pairs      every rank sends to and receives from every
//                              other rank: one group call of long messages
//                              (6.5 parts of HETCCL_GPU_BORDER_CHUNK) with
//                              the peers listed in descending order; eight
//                              ring steps without a sync between them; one
//                              group call per size from 4 B to 1 MiB + 4 B.
//                              Each result checked. Prints
//                              "PAIRS OK <device> <staged> <none>" (the
//                              calls by path: hetcclCommInfo_t.pathCalls),
//                              or "PAIRS WRONG ..." / "PAIRS FAIL ...".
//   pair_relay_rank mismatch   ranks 0 and 1: rank 0 sends 256 KiB, rank 1
//                              receives 128 KiB. Prints "MISMATCH <code>
//                              <text>" once the call or the communicator
//                              failed, or "MISMATCH NONE" after 60 s.
//   pair_relay_rank mismatch-late   the same, rank 1 0.5 s after rank 0
//                              (whose send of 256 KiB fits the channel's
//                              slots, so its call may end first).
//   pair_relay_rank abort      ranks 0 and 1: rank 0 sends 17 parts that
//                              rank 1 never receives, so its stream waits
//                              on the relay; after 1 s it aborts. Prints
//                              "ABORT <abort s> <stream s> <reopen> <s>":
//                              how long the abort took, how long after it
//                              the stream was free, whether a new
//                              communicator of rank 0 alone then works
//                              ("ok"), and how long its abort took (one
//                              rank, nothing in flight); rank 1 prints
//                              "IDLE".
//   pair_relay_rank exit       the same send; rank 1 exits after 1 s.
//                              Rank 0 prints "EXIT <code> <s> <text>" once
//                              it failed, or "EXIT NONE" after 60 s.
//   pair_relay_rank left       ranks 0 and 1: rank 1 destroys its
//                              communicator at once; 1 s later rank 0
//                              sends to it. Prints "LEFT <code> <text>"
//                              (the send's error), or "LEFT NONE".
//   pair_relay_rank pingpong   ranks 0 and the last: 4 KiB there and back,
//                              500 times after 50 warm-up trips, while
//                              the other ranks idle in a final AllReduce.
//                              Rank 0 prints "PINGPONG <us a round trip>"
//                              (HETCCL_DEVICE=host: the same on host ranks).
// Ranks destroy their communicators at staggered times (rank r after
// 0.1 r s): the relays' goodbyes.
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hetccl/hetccl.h"

namespace {

const char* kind() {
  const char* k = getenv("HETCCL_DEVICE");
  return k && *k ? k : "emu";
}

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int32_t value(int from, int to, size_t i, int step) {
  return static_cast<int32_t>(from * 1000003 + to * 7919 + step * 131 + static_cast<int64_t>(i % 100003));
}

struct Job {
  hetcclComm_t comm = nullptr;
  hetcclStream_t stream = nullptr;
  int rank = 0, nranks = 0;
};

bool ok(hetcclResult_t r, const Job& j, const char* what) {
  if (r == hetcclSuccess) return true;
  printf("%s FAIL %d %s\n", what, r, hetcclGetLastError(j.comm));
  return false;
}

// Device buffers of n int32 for every peer, filled for (from, to, step).
struct Buffers {
  std::vector<void*> send, recv;
  size_t n = 0;
};

void fill(Buffers& b, const Job& j, size_t n, int step) {
  b.n = n;
  std::vector<int32_t> host(n);
  for (int p = 0; p < j.nranks; ++p) {
    if (static_cast<int>(b.send.size()) <= p) {
      b.send.push_back(nullptr);
      b.recv.push_back(nullptr);
    }
    for (size_t i = 0; i < n; ++i) host[i] = value(j.rank, p, i, step);
    hetcclDeviceCopy(kind(), b.send[p], host.data(), n * 4);
    for (size_t i = 0; i < n; ++i) host[i] = -1;
    hetcclDeviceCopy(kind(), b.recv[p], host.data(), n * 4);
  }
}

// Whether what came from each peer in `from` is right; prints the first wrong value.
bool check(const Buffers& b, const Job& j, const std::vector<int>& from, int step, const char* what) {
  std::vector<int32_t> host(b.n);
  for (int p : from) {
    hetcclDeviceCopy(kind(), host.data(), b.recv[p], b.n * 4);
    for (size_t i = 0; i < b.n; ++i)
      if (host[i] != value(p, j.rank, i, step)) {
        printf("PAIRS WRONG %s: from rank %d, %zu ints, index %zu: %d, want %d\n", what, p, b.n, i, host[i],
               value(p, j.rank, i, step));
        return false;
      }
  }
  return true;
}

int pairs(Job& j) {
  const char* chunkEnv = getenv("HETCCL_GPU_BORDER_CHUNK");
  const size_t part = chunkEnv ? strtoull(chunkEnv, nullptr, 10) : size_t{8} << 20;
  const size_t most = part * 13 / 2 / 4 + 1;  // 6.5 parts and 4 bytes
  Buffers b;
  for (int p = 0; p < j.nranks; ++p) {
    b.send.push_back(nullptr);
    b.recv.push_back(nullptr);
    if (!ok(hetcclDeviceAlloc(kind(), &b.send[p], most * 4), j, "PAIRS") ||
        !ok(hetcclDeviceAlloc(kind(), &b.recv[p], most * 4), j, "PAIRS"))
      return 1;
  }
  std::vector<int> others;
  for (int p = j.nranks - 1; p >= 0; --p)
    if (p != j.rank) others.push_back(p);
  // Every pair at once, long messages, peers in descending order.
  fill(b, j, most, 0);
  if (!ok(hetcclGroupStart(), j, "PAIRS")) return 1;
  for (int p : others) {
    if (!ok(hetcclSend(b.send[p], most, hetcclInt32, p, j.comm, j.stream), j, "PAIRS") ||
        !ok(hetcclRecv(b.recv[p], most, hetcclInt32, p, j.comm, j.stream), j, "PAIRS"))
      return 1;
  }
  if (!ok(hetcclGroupEnd(), j, "PAIRS") || !ok(hetcclStreamSynchronize(kind(), j.stream), j, "PAIRS") ||
      !check(b, j, others, 0, "every pair"))
    return 1;
  // Ring steps back to back: each reuses the channels' slots.
  const int next = (j.rank + 1) % j.nranks, prev = (j.rank + j.nranks - 1) % j.nranks;
  const size_t ring = part * 3 / 4 + 3;
  for (int step = 1; step <= 8; ++step) {
    fill(b, j, ring, step);  // a synchronous copy: the last step is over
    hetcclGroupStart();
    hetcclSend(b.send[next], ring, hetcclInt32, next, j.comm, j.stream);
    hetcclRecv(b.recv[prev], ring, hetcclInt32, prev, j.comm, j.stream);
    if (!ok(hetcclGroupEnd(), j, "PAIRS")) return 1;
    if (step % 4 && !ok(hetcclStreamSynchronize(kind(), j.stream), j, "PAIRS")) return 1;
    if (step % 4 && !check(b, j, {prev}, step, "ring")) return 1;
  }
  if (!ok(hetcclStreamSynchronize(kind(), j.stream), j, "PAIRS") || !check(b, j, {prev}, 8, "ring")) return 1;
  // Sizes: one part and less, a part boundary and across it.
  for (size_t n = 1; n <= (size_t{1} << 18) + 1; n = n * 4 + 1) {
    fill(b, j, std::min(n, most), 100 + static_cast<int>(n % 97));
    hetcclGroupStart();
    for (int p : others) {
      hetcclSend(b.send[p], b.n, hetcclInt32, p, j.comm, j.stream);
      hetcclRecv(b.recv[p], b.n, hetcclInt32, p, j.comm, j.stream);
    }
    if (!ok(hetcclGroupEnd(), j, "PAIRS") || !ok(hetcclStreamSynchronize(kind(), j.stream), j, "PAIRS") ||
        !check(b, j, others, 100 + static_cast<int>(n % 97), "sizes"))
      return 1;
  }
  hetcclCommInfo_t info;
  memset(&info, 0, sizeof(info));
  info.size = sizeof(info);
  if (!ok(hetcclCommGetInfo(j.comm, &info), j, "PAIRS")) return 1;
  printf("PAIRS OK %llu %llu %llu\n", info.pathCalls[hetcclPathDevice], info.pathCalls[hetcclPathStaged],
         info.pathCalls[hetcclPathNone]);
  for (int p = 0; p < j.nranks; ++p) {
    hetcclDeviceFree(kind(), b.send[p]);
    hetcclDeviceFree(kind(), b.recv[p]);
  }
  return 0;
}

int mismatch(Job& j, bool late) {
  if (j.rank > 1) return 0;
  const size_t n = 64 * 1024;  // ints
  void* buf = nullptr;
  if (!ok(hetcclDeviceAlloc(kind(), &buf, n * 4), j, "MISMATCH")) return 1;
  if (late && j.rank == 1) usleep(500000);
  hetcclResult_t r = j.rank == 0 ? hetcclSend(buf, n, hetcclInt32, 1, j.comm, j.stream)
                                 : hetcclRecv(buf, n / 2, hetcclInt32, 0, j.comm, j.stream);
  std::string text = r == hetcclSuccess ? "" : hetcclGetLastError(j.comm);
  const double t0 = now();
  hetcclResult_t async = hetcclSuccess;
  if (r == hetcclSuccess) r = hetcclStreamSynchronize(kind(), j.stream);
  while (r == hetcclSuccess && async == hetcclSuccess && now() - t0 < 60) {
    usleep(50000);
    hetcclCommGetAsyncError(j.comm, &async);
  }
  if (r == hetcclSuccess && async == hetcclSuccess) {
    printf("MISMATCH NONE\n");
    return 1;
  }
  if (text.empty()) text = hetcclGetLastError(j.comm);
  printf("MISMATCH %d %.3f %s\n", r != hetcclSuccess ? r : async, now() - t0, text.c_str());
  hetcclCommAbort(j.comm);
  j.comm = nullptr;
  return 0;
}

// Waits until the stream is free, the call failed or 60 s passed; the
// result (hetcclSuccess: nothing failed), and the error text in *text.
hetcclResult_t awaitFailure(Job& j, std::string* text) {
  hetcclResult_t r = hetcclStreamSynchronize(kind(), j.stream), async = hetcclSuccess;
  const double t0 = now();
  while (r == hetcclSuccess && async == hetcclSuccess && now() - t0 < 60) {
    usleep(50000);
    hetcclCommGetAsyncError(j.comm, &async);
  }
  *text = hetcclGetLastError(j.comm);
  return r != hetcclSuccess ? r : async;
}

// A communicator of this rank alone on the same device: an AllReduce of it
// works. It is then aborted: *abortS, what an abort costs with nothing in
// flight and no border (the vendor library's and the runtime's share).
bool reopenAlone(double* abortS) {
  hetcclUniqueId id;
  hetcclComm_t c = nullptr;
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.device = kind();
  unsetenv("HETCCL_GROUP_MAP");  // the job's map names ranks this communicator lacks
  if (hetcclGetUniqueId(&id) != hetcclSuccess || hetcclCommInitRankConfig(&c, 1, id, 0, &cfg) != hetcclSuccess) {
    printf("REOPEN %s\n", hetcclGetLastError(nullptr));
    return false;
  }
  void* buf = nullptr;
  hetcclStream_t s = nullptr;
  int32_t v = 41;
  bool good = hetcclDeviceAlloc(kind(), &buf, 4) == hetcclSuccess && hetcclStreamCreate(kind(), &s) == hetcclSuccess &&
              hetcclDeviceCopy(kind(), buf, &v, 4) == hetcclSuccess &&
              hetcclAllReduce(buf, buf, 1, hetcclInt32, hetcclSum, c, s) == hetcclSuccess &&
              hetcclStreamSynchronize(kind(), s) == hetcclSuccess;
  v = 0;
  good = good && hetcclDeviceCopy(kind(), &v, buf, 4) == hetcclSuccess && v == 41;
  if (s) hetcclStreamDestroy(kind(), s);
  if (buf) hetcclDeviceFree(kind(), buf);
  const double t0 = now();
  const bool aborted = hetcclCommAbort(c) == hetcclSuccess;
  *abortS = now() - t0;
  return aborted && good;
}

// abort and exit: rank 0's send of 17 parts waits on a rank 1 that never receives.
int stuckSend(Job& j, bool abort) {
  if (j.rank > 1) return 0;
  const char* chunkEnv = getenv("HETCCL_GPU_BORDER_CHUNK");
  const size_t part = chunkEnv ? strtoull(chunkEnv, nullptr, 10) : size_t{2} << 20;
  const size_t bytes = part * 17;
  void* buf = nullptr;
  if (!ok(hetcclDeviceAlloc(kind(), &buf, bytes), j, abort ? "ABORT" : "EXIT")) return 1;
  if (j.rank == 1) {
    if (!abort) {
      usleep(1000000);
      _exit(0);  // no destroy, no goodbye
    }
    usleep(3000000);  // rank 0 aborts meanwhile
    printf("IDLE\n");
    return 0;
  }
  if (!ok(hetcclSend(buf, bytes / 4, hetcclInt32, 1, j.comm, j.stream), j, abort ? "ABORT" : "EXIT")) return 1;
  if (!abort) {
    std::string text;
    const double t0 = now();
    const hetcclResult_t r = awaitFailure(j, &text);
    if (r == hetcclSuccess)
      printf("EXIT NONE\n");
    else
      printf("EXIT %d %.3f %s\n", r, now() - t0, text.c_str());
    hetcclCommAbort(j.comm);
    j.comm = nullptr;
    return r == hetcclSuccess ? 1 : 0;
  }
  std::atomic<double> freeAt{0};
  std::thread sync([&] {
    hetcclStreamSynchronize(kind(), j.stream);
    freeAt.store(now());
  });
  usleep(1000000);
  const bool waited = freeAt.load() == 0;
  const double t0 = now();
  const hetcclResult_t r = hetcclCommAbort(j.comm);
  const double t1 = now();
  j.comm = nullptr;
  sync.join();
  double plain = 0;
  const bool reopened = reopenAlone(&plain);
  printf("ABORT %.3f %.3f %s %.3f%s%s\n", t1 - t0, freeAt.load() - t0, reopened ? "ok" : "failed", plain,
         waited ? "" : " (the stream did not wait)", r == hetcclSuccess ? "" : " (the abort failed)");
  return waited && reopened && r == hetcclSuccess ? 0 : 1;
}

// pingpong: the latency of a small send/recv while other ranks idle.
int pingpong(Job& j) {
  const int peer = j.rank == 0 ? j.nranks - 1 : j.rank == j.nranks - 1 ? 0 : -1;
  void* buf = nullptr;
  void* one = nullptr;
  if (!ok(hetcclDeviceAlloc(kind(), &buf, 4096), j, "PINGPONG") ||
      !ok(hetcclDeviceAlloc(kind(), &one, 4), j, "PINGPONG"))
    return 1;
  double t0 = 0;
  for (int i = 0; peer >= 0 && i < 550; ++i) {
    if (i == 50) t0 = now();
    const bool first = j.rank == 0;
    for (int leg = 0; leg < 2; ++leg) {
      const hetcclResult_t r = (leg == 0) == first ? hetcclSend(buf, 1024, hetcclInt32, peer, j.comm, j.stream)
                                                   : hetcclRecv(buf, 1024, hetcclInt32, peer, j.comm, j.stream);
      if (!ok(r, j, "PINGPONG") || !ok(hetcclStreamSynchronize(kind(), j.stream), j, "PINGPONG")) return 1;
    }
  }
  if (j.rank == 0) printf("PINGPONG %.1f\n", (now() - t0) / 500 * 1e6);
  if (!ok(hetcclAllReduce(one, one, 1, hetcclInt32, hetcclSum, j.comm, j.stream), j, "PINGPONG") ||
      !ok(hetcclStreamSynchronize(kind(), j.stream), j, "PINGPONG"))
    return 1;
  hetcclDeviceFree(kind(), buf);
  hetcclDeviceFree(kind(), one);
  return 0;
}

// left: a send to a rank whose communicator is gone fails at once.
int left(Job& j) {
  if (j.rank > 1) return 0;
  if (j.rank == 1) {
    const hetcclResult_t r = hetcclCommDestroy(j.comm);
    j.comm = nullptr;
    return r == hetcclSuccess ? 0 : 1;
  }
  usleep(1000000);
  void* buf = nullptr;
  if (!ok(hetcclDeviceAlloc(kind(), &buf, 4096), j, "LEFT")) return 1;
  const hetcclResult_t r = hetcclSend(buf, 1024, hetcclInt32, 1, j.comm, j.stream);
  if (r == hetcclSuccess) {
    printf("LEFT NONE\n");
    return 1;
  }
  printf("LEFT %d %s\n", r, hetcclGetLastError(j.comm));
  hetcclDeviceFree(kind(), buf);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string what = argc > 1 ? argv[1] : "pairs";
  Job j;
  if (hetcclCommInitFromEnv(&j.comm, nullptr) != hetcclSuccess) {
    printf("INITERR %s\n", hetcclGetLastError(nullptr));
    return 2;
  }
  hetcclCommUserRank(j.comm, &j.rank);
  hetcclCommCount(j.comm, &j.nranks);
  if (!ok(hetcclStreamCreate(kind(), &j.stream), j, "STREAM")) return 2;
  const int rc = what == "mismatch"        ? mismatch(j, false)
                 : what == "mismatch-late" ? mismatch(j, true)
                 : what == "abort"         ? stuckSend(j, true)
                 : what == "exit"          ? stuckSend(j, false)
                 : what == "left"          ? left(j)
                 : what == "pingpong"      ? pingpong(j)
                                           : pairs(j);
  if (j.comm) {
    usleep(static_cast<useconds_t>(100000 * j.rank));
    if (hetcclCommDestroy(j.comm) != hetcclSuccess) {
      printf("DESTROY FAIL %s\n", hetcclGetLastError(nullptr));
      return 3;
    }
  }
  hetcclStreamDestroy(kind(), j.stream);
  return rc;
}
