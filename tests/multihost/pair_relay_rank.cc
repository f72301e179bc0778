// pair_relay_rank: one rank of the send/recv checks across hosts in
// check_emu_border.py (GPU ranks of different groups on different hosts:
// comm/pair_relay.h). Joins with hetcclCommInitFromEnv (torchrun
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
// Ranks destroy their communicators at staggered times (rank r after
// 0.1 r s): the relays' goodbyes.
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

int mismatch(Job& j) {
  if (j.rank > 1) return 0;
  const size_t n = 64 * 1024;  // ints
  void* buf = nullptr;
  if (!ok(hetcclDeviceAlloc(kind(), &buf, n * 4), j, "MISMATCH")) return 1;
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
  const int rc = what == "mismatch" ? mismatch(j) : pairs(j);
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
