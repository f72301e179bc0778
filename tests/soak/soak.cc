// Soak test: a long random sequence of collectives on 4 ranks in two groups
// (a,a,b,b), each rank a forked process with its own communicator (public
// API only). Every rank draws the same sequence from one shared seed: kind
// (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, a
// Send/Recv shift), data type, op, root, and a log-uniform count of
// 0..262143 elements. Every --check-every'th operation carries inputs whose
// exact result is known (small integers, exact in every type and in any
// reduction order) and is checked element by element on every rank.
//
// Resources: each rank reads its resident set (VmRSS) and its open file
// descriptors (/proc/self/fd) after the warmup and at the end. RSS may grow
// by less than --rss-limit-kib (5 MiB) and the fd count not at all. The
// warmup starts with one call of each kind at the largest count, so the
// library's high-water buffers (scratch, staging) already exist when the
// first measurement is taken. Also printed: the growth of RssAnon, RssShmem
// and of the bytes malloc has handed out (live data, whatever the allocator
// keeps).
//
// The ranks fix glibc's mmap threshold at its initial 128 KiB: otherwise
// glibc raises it after each large free (up to 32 MiB), so the multi-MiB
// temporaries of some calls (e.g. the scaled copy of an avg) come from the
// heap afterwards and freed heap stays resident: VmRSS then grows by up to
// ~6 MiB over 20,000 calls while live data grows by ~60 KiB, which is the
// allocator's retention, not a leak. --default-malloc keeps glibc's default.
//
//   hetccl_soak [--transport shm|tcp] [--ops 10000] [--warmup 500] [--seed N]
//               [--check-every 8] [--max-count 262143] [--deadline-s 170]
//               [--inject-leak rss|fd] [--default-malloc]
//
// --inject-leak makes rank 0 leak 64 KiB per call, or a file descriptor
// every 20 calls, after the warmup: the self-test that the limits catch a
// leak (ctest soak.catches_*).
//
// Exit status 0 only if every rank finished, every check passed and the
// resource limits held; the numbers are printed either way.
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hetccl/hetccl.h"
#include "forked_ranks.h"
#include "reference/elements.h"

namespace {

constexpr int kRanks = 4;
const char* const kGroups[kRanks] = {"a", "a", "b", "b"};

struct Options {
  std::string transport = "shm";
  long ops = 10000;
  long warmup = 500;
  uint64_t seed = 20240611;
  long checkEvery = 8;
  size_t maxCount = 262143;
  long rssLimitKiB = 5 * 1024;
  int deadlineS = 170;
  std::string injectLeak;  // "", "rss" or "fd"
  bool defaultMalloc = false;
};

// ---- element encoding: exact small values in every type ----

void put(void* buf, size_t i, hetcclDataType_t t, double v) {
  ref::storeElem(t, static_cast<uint8_t*>(buf) + i * ref::typeSize(t), v);
}

// Input element i of `rank` in operation `op`: small integers (or 0) that
// keep every sum, product and average exact in every type.
double inputValue(long op, int rank, size_t i, hetcclDataType_t t) {
  uint64_t h = static_cast<uint64_t>(op) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull +
               i * 0x94d049bb133111ebull;
  h ^= h >> 29;
  return ref::isUnsignedInt(t) ? static_cast<double>(h % 3) : static_cast<double>(h % 5) - 2;
}

// ---- the random sequence ----

enum Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAlltoAll, kSendRecv, kKinds };
const char* const kKindNames[kKinds] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                        "Reduce",    "AlltoAll",  "Send/Recv"};

struct Op {
  Kind kind;
  hetcclDataType_t dt;
  hetcclRedOp_t red;
  int root;  // Broadcast/Reduce root; Send/Recv shift (1..3)
  size_t count;
};

Op drawOp(std::mt19937_64& rng, long index, const Options& o) {
  Op op;
  op.kind = static_cast<Kind>(rng() % kKinds);
  op.dt = static_cast<hetcclDataType_t>(rng() % hetcclNumTypes);
  op.red = static_cast<hetcclRedOp_t>(rng() % hetcclNumOps);
  op.root = static_cast<int>(rng() % kRanks);
  if (op.kind == kSendRecv) op.root = 1 + static_cast<int>(rng() % (kRanks - 1));
  double u = std::uniform_real_distribution<double>(0, std::log2(static_cast<double>(o.maxCount) + 1))(rng);
  op.count = std::min(o.maxCount, static_cast<size_t>(std::exp2(u)) - 1);
  if (index < kKinds) {  // warmup head: every kind once at the largest count
    op.kind = static_cast<Kind>(index);
    op.count = o.maxCount;
    op.dt = hetcclFloat64;
  }
  return op;
}

double combine(hetcclRedOp_t red, double a, double b) {
  switch (red) {
    case hetcclProd: return a * b;
    case hetcclMax: return std::max(a, b);
    case hetcclMin: return std::min(a, b);
    default: return a + b;  // sum, avg
  }
}

// Exact reduction over all ranks of element i (avg as the library defines it).
double reduced(long opIndex, const Op& op, size_t i) {
  const bool floatAvg = op.red == hetcclAvg && ref::isFloating(op.dt);
  auto in = [&](int r) {
    return floatAvg ? inputValue(opIndex, r, i, op.dt) / kRanks : inputValue(opIndex, r, i, op.dt);
  };
  double v = in(0);
  for (int r = 1; r < kRanks; ++r) v = combine(op.red, v, in(r));
  if (op.red == hetcclAvg && !ref::isFloating(op.dt)) v = std::trunc(v / kRanks);
  return v;
}

// ---- resources ----

// A field of /proc/self/status in KiB ("VmRSS", "RssAnon", "RssShmem").
long statusKiB(const char* field) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  const size_t n = strlen(field);
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, field, n) == 0 && line[n] == ':') kib = strtol(line + n + 1, nullptr, 10);
  fclose(f);
  return kib;
}

// Bytes malloc has handed out and not got back (heap and mmapped chunks).
long heapInUseKiB() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<long>((m.uordblks + m.hblkhd) / 1024);
}

int openFds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

// ---- one rank ----

#define CALL(expr)                                                                                              \
  do {                                                                                                          \
    hetcclResult_t r_ = (expr);                                                                                 \
    if (r_ != hetcclSuccess) {                                                                                  \
      fprintf(stderr, "soak rank %d op %ld: %s failed: %s: %s\n", rank, index, #expr, hetcclGetErrorString(r_), \
              hetcclGetLastError(comm));                                                                        \
      _exit(3);                                                                                                 \
    }                                                                                                           \
  } while (0)

[[noreturn]] void runRank(int rank, const hetcclUniqueId& id, const Options& o) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (!o.defaultMalloc) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  long index = -1;
  hetcclComm_t comm = nullptr;
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.groupName = kGroups[rank];
  cfg.transport = o.transport.c_str();
  cfg.timeoutSeconds = 60;
  CALL(hetcclCommInitRankConfig(&comm, kRanks, id, rank, &cfg));
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  CALL(hetcclCommGetInfo(comm, &info));
  if (info.ngroups != 2 || strcmp(info.transport, o.transport.c_str()) != 0) {
    fprintf(stderr, "soak rank %d: %d groups over %s, expected 2 over %s\n", rank, info.ngroups, info.transport,
            o.transport.c_str());
    _exit(3);
  }

  // Buffers for the largest call, allocated and touched once.
  const size_t maxBytes = o.maxCount * kRanks * 8;
  std::vector<uint8_t> send(maxBytes, 0), recv(maxBytes, 0), want(maxBytes, 0);
  std::mt19937_64 rng(o.seed);
  long checks = 0, bad = 0, elementsChecked = 0;
  long rssWarm = 0, rssEnd = 0, anonWarm = 0, anonEnd = 0, shmemWarm = 0, shmemEnd = 0;
  long heapWarm = 0, heapEnd = 0;  // malloc'd bytes in use (KiB): growth here is live data, not fragmentation
  std::vector<void*> leaked;       // --inject-leak rss
  int fdsWarm = 0, fdsEnd = 0;
  std::vector<long> kindCount(kKinds, 0);
  auto t0 = std::chrono::steady_clock::now();
  double warmS = 0;

  for (index = 0; index < o.ops; ++index) {
    if (index == o.warmup) {
      rssWarm = statusKiB("VmRSS");
      anonWarm = statusKiB("RssAnon");
      shmemWarm = statusKiB("RssShmem");
      heapWarm = heapInUseKiB();
      fdsWarm = openFds();
      warmS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (rank == 0 && index >= o.warmup && !o.injectLeak.empty()) {
      if (o.injectLeak == "rss") {
        leaked.push_back(malloc(64 << 10));
        memset(leaked.back(), 1, 64 << 10);
      } else if (index % 20 == 0 && dup(1) < 0) {
        perror("dup");
      }
    }
    const Op op = drawOp(rng, index, o);
    kindCount[op.kind]++;
    const size_t c = op.count, es = ref::typeSize(op.dt);
    const bool check = index % o.checkEvery == 0;
    // Input elements, output elements.
    size_t nIn = c, nOut = c;
    switch (op.kind) {
      case kAllGather: nOut = c * kRanks; break;
      case kReduceScatter: nIn = c * kRanks; break;
      case kAlltoAll: nIn = nOut = c * kRanks; break;
      default: break;
    }
    if (check) {
      for (size_t i = 0; i < nIn; ++i) put(send.data(), i, op.dt, inputValue(index, rank, i, op.dt));
      memset(recv.data(), 0xa5, nOut * es);
    }
    switch (op.kind) {
      case kAllReduce: CALL(hetcclAllReduce(send.data(), recv.data(), c, op.dt, op.red, comm, nullptr)); break;
      case kAllGather: CALL(hetcclAllGather(send.data(), recv.data(), c, op.dt, comm, nullptr)); break;
      case kReduceScatter: CALL(hetcclReduceScatter(send.data(), recv.data(), c, op.dt, op.red, comm, nullptr)); break;
      case kBroadcast: CALL(hetcclBroadcast(send.data(), recv.data(), c, op.dt, op.root, comm, nullptr)); break;
      case kReduce: CALL(hetcclReduce(send.data(), recv.data(), c, op.dt, op.red, op.root, comm, nullptr)); break;
      case kAlltoAll: CALL(hetcclAlltoAll(send.data(), recv.data(), c, op.dt, comm, nullptr)); break;
      case kSendRecv:
        CALL(hetcclGroupStart());
        CALL(hetcclSend(send.data(), c, op.dt, (rank + op.root) % kRanks, comm, nullptr));
        CALL(hetcclRecv(recv.data(), c, op.dt, (rank - op.root + kRanks) % kRanks, comm, nullptr));
        CALL(hetcclGroupEnd());
        break;
      default: abort();
    }
    if (!check || (op.kind == kReduce && rank != op.root)) continue;
    // The exact result, encoded the same way.
    for (size_t i = 0; i < nOut; ++i) {
      double v = 0;
      switch (op.kind) {
        case kAllReduce:
        case kReduce: v = reduced(index, op, i); break;
        case kReduceScatter: v = reduced(index, op, rank * c + i); break;
        case kAllGather: v = inputValue(index, static_cast<int>(i / c), i % c, op.dt); break;
        case kBroadcast: v = inputValue(index, op.root, i, op.dt); break;
        case kAlltoAll: v = inputValue(index, static_cast<int>(i / c), rank * c + i % c, op.dt); break;
        case kSendRecv: v = inputValue(index, (rank - op.root + kRanks) % kRanks, i, op.dt); break;
        default: abort();
      }
      put(want.data(), i, op.dt, v);
    }
    ++checks;
    elementsChecked += static_cast<long>(nOut);
    if (memcmp(want.data(), recv.data(), nOut * es) != 0) {
      size_t at = 0;
      while (memcmp(want.data() + at * es, recv.data() + at * es, es) == 0) ++at;
      if (++bad <= 10)
        fprintf(stderr, "soak rank %d op %ld: %s count %zu type %d op %d root %d: element %zu of %zu differs\n", rank,
                index, kKindNames[op.kind], c, op.dt, op.red, op.root, at, nOut);
    }
  }
  double totalS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rssEnd = statusKiB("VmRSS");
  anonEnd = statusKiB("RssAnon");
  shmemEnd = statusKiB("RssShmem");
  heapEnd = heapInUseKiB();
  fdsEnd = openFds();
  CALL(hetcclCommFinalize(comm));
  CALL(hetcclCommDestroy(comm));

  const long grow = rssEnd - rssWarm;
  const bool rssOk = rssWarm > 0 && grow < o.rssLimitKiB;
  const bool fdsOk = fdsWarm > 0 && fdsEnd == fdsWarm;
  printf(
      "soak rank %d (group %s, %s): %ld ops in %.1f s (warmup %ld in %.1f s), %ld checked (%ld elements), %ld bad;"
      " VmRSS after warmup %ld KiB, at end %ld KiB (%+ld KiB, limit <%ld; anon %+ld, shmem %+ld, malloc in use %+ld): "
      "%s;"
      " open fds %d -> %d: %s\n",
      rank, kGroups[rank], o.transport.c_str(), o.ops, totalS, o.warmup, warmS, checks, elementsChecked, bad, rssWarm,
      rssEnd, grow, o.rssLimitKiB, anonEnd - anonWarm, shmemEnd - shmemWarm, heapEnd - heapWarm,
      rssOk ? "ok" : "TOO MUCH", fdsWarm, fdsEnd, fdsOk ? "ok" : "CHANGED");
  if (rank == 0) {
    printf("soak: calls by kind:");
    for (int k = 0; k < kKinds; ++k) printf(" %s %ld", kKindNames[k], kindCount[k]);
    printf("\n");
  }
  fflush(stdout);
  _exit(bad == 0 && rssOk && fdsOk ? 0 : 1);
}

bool parseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--transport" && (v = next()))
      o.transport = v;
    else if (a == "--ops" && (v = next()))
      o.ops = atol(v);
    else if (a == "--warmup" && (v = next()))
      o.warmup = atol(v);
    else if (a == "--seed" && (v = next()))
      o.seed = strtoull(v, nullptr, 0);
    else if (a == "--check-every" && (v = next()))
      o.checkEvery = atol(v);
    else if (a == "--max-count" && (v = next()))
      o.maxCount = strtoull(v, nullptr, 0);
    else if (a == "--rss-limit-kib" && (v = next()))
      o.rssLimitKiB = atol(v);
    else if (a == "--deadline-s" && (v = next()))
      o.deadlineS = atoi(v);
    else if (a == "--inject-leak" && (v = next()))
      o.injectLeak = v;
    else if (a == "--default-malloc")
      o.defaultMalloc = true;
    else
      return false;
  }
  return o.ops > o.warmup && o.warmup >= kKinds && o.checkEvery > 0 && o.maxCount > 0 &&
         (o.transport == "shm" || o.transport == "tcp") &&
         (o.injectLeak.empty() || o.injectLeak == "rss" || o.injectLeak == "fd");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, o)) {
    fprintf(stderr,
            "usage: %s [--transport shm|tcp] [--ops N] [--warmup N>=7] [--seed N] [--check-every N] [--max-count N]"
            " [--rss-limit-kib N] [--deadline-s N] [--inject-leak rss|fd] [--default-malloc]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  printf("soak: %ld ops over %s on ranks a,a,b,b, seed %llu, every %ld-th checked, counts 0..%zu, %s\n", o.ops,
         o.transport.c_str(), static_cast<unsigned long long>(o.seed), o.checkEvery, o.maxCount,
         o.defaultMalloc ? "glibc's default malloc settings" : "mmap threshold fixed at 128 KiB");
  // Ranks print their own lines; the pipe only tells the parent they are gone.
  hetccl_tools::ForkedRanks ranks;
  std::string error;
  if (!ranks.start(
          kRanks, true,
          [&o](int rank, int, int idFd) {
            hetcclUniqueId id{};
            if (!hetccl_tools::readId(idFd, &id)) _exit(3);
            runRank(rank, id, o);
          },
          &error)) {
    fprintf(stderr, "soak: %s\n", error.c_str());
    return 1;
  }
  hetcclUniqueId id;
  if (hetcclGetUniqueId(&id) != hetcclSuccess) {
    fprintf(stderr, "soak: hetcclGetUniqueId: %s\n", hetcclGetLastError(nullptr));
    return 1;
  }
  ranks.sendId(id);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.deadlineS);
  while (!ranks.allEnded() && std::chrono::steady_clock::now() < deadline)
    ranks.pump(20, [](int, const std::string&) {});
  const std::vector<int> killed = ranks.killRemaining();
  int failed = static_cast<int>(killed.size());
  for (int r : killed) fprintf(stderr, "soak: rank %d still running after %d s: killed\n", r, o.deadlineS);
  for (int r = 0; r < kRanks; ++r) {
    const int status = ranks.status(r);
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) || std::count(killed.begin(), killed.end(), r)) continue;
    ++failed;
    if (WIFSIGNALED(status))
      fprintf(stderr, "soak: rank %d killed by signal %d\n", r, WTERMSIG(status));
    else
      fprintf(stderr, "soak: rank %d failed (exit %d)\n", r, WEXITSTATUS(status));
  }
  printf("soak: %s\n", failed ? "FAILED" : "passed");
  return failed ? 1 : 0;
}
