// elastic_rank: one process of the elastic job on emulated hosts
// (check_elastic.py), a training loop that outlives a lost rank.
//
//   elastic_rank train DIR   a rank of the job, from the torchrun variables
//   elastic_rank join DIR R  a replacement that joins the grown job as rank R
//
// Each step is an AllReduce of 64K floats whose result is checked in full
// (rank r gives r + 1 + (i + step) % 5 at element i), so a step on a wrong
// or stale communicator shows as WRONG. DIR is the job's folder on the
// shared file system, the elastic agent's (the driver's) channel:
//   DIR/dead        the ranks the agent saw die, written once it saw them
//   DIR/join.R      written by a replacement once it is up
//   DIR/grow-id     the grow id, written by rank 0 of the shrunk communicator
// A rank of the job: init, train until a step fails, read DIR/dead (a rank
// named there stops: it was fenced off), shrink past the dead ranks with
// HETCCL_SHRINK_ABORT, train on the shrunk communicator until every
// replacement is up (rank 0 sees DIR/join.*, and the step's flag AllReduce
// tells the others), grow back to the job's size and train on.
// Lines for the driver, with CLOCK_MONOTONIC seconds t:
//   INIT <code> <t>           ITER <step> <t> (every 10 steps)
//   FAIL <step> <code> <t> <hetcclGetLastError text>
//   FENCED <t>                SHRUNK <nranks> <step> <t>
//   GROWN <nranks> <t>        RESUMED <step> <t> (the first right step after the grow)
//   DONE <step> <t>           ERROR <what> <text> (then a non-zero exit)
//   WRONG <step> <index> <value> <expected>
// Exit 0 after DONE (or FENCED), 2 a failed call, 3 a wait past its limit,
// 4 a wrong result.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hetccl/hetccl.h"

namespace {

constexpr size_t kCount = 64 * 1024;
constexpr int kStepsAfterGrow = 30;  // right steps every rank runs on the grown communicator
constexpr double kWaitS = 90;        // for DIR/dead, the replacements, the grow id

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

[[noreturn]] void die(int code, const char* what, hetcclComm_t comm) {
  printf("ERROR %s %s\n", what, hetcclGetLastError(comm));
  exit(code);
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Writes `bytes` to path through a rename, so a reader sees all or nothing.
void publish(const std::string& path, const void* bytes, size_t n) {
  std::ofstream(path + ".part", std::ios::binary)
      .write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
  if (rename((path + ".part").c_str(), path.c_str()) != 0) {
    printf("ERROR publish cannot rename %s.part: %s\n", path.c_str(), strerror(errno));
    exit(2);
  }
}

// One training step on comm: the AllReduce and its check. Returns the call's result; exits on a wrong value.
hetcclResult_t step(hetcclComm_t comm, int64_t s, std::vector<float>& send, std::vector<float>& recv) {
  int rank = 0, n = 0;
  hetcclCommUserRank(comm, &rank);
  hetcclCommCount(comm, &n);
  for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>(rank + 1 + static_cast<int>((i + s) % 5));
  hetcclResult_t r = hetcclAllReduce(send.data(), recv.data(), kCount, hetcclFloat32, hetcclSum, comm, nullptr);
  if (r != hetcclSuccess) return r;
  for (size_t i = 0; i < kCount; ++i) {
    float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>((i + s) % 5));
    if (recv[i] != want) {
      printf("WRONG %lld %zu %f %f\n", static_cast<long long>(s), i, recv[i], want);
      exit(4);
    }
  }
  return r;
}

// Rank 0's step count on every rank: ranks that lost a step to the failure, and
// replacements, go on from the same step.
void syncStep(hetcclComm_t comm, int64_t* s) {
  if (hetcclBroadcast(s, s, 1, hetcclInt64, 0, comm, nullptr) != hetcclSuccess) die(2, "broadcast", comm);
}

// Trains on the grown communicator until every rank has run kStepsAfterGrow right steps.
int trainGrown(hetcclComm_t grown, int64_t s) {
  std::vector<float> send(kCount), recv(kCount);
  syncStep(grown, &s);
  for (int k = 0; k < kStepsAfterGrow; ++k, ++s) {
    if (step(grown, s, send, recv) != hetcclSuccess) die(2, "grown-step", grown);
    if (k == 0) printf("RESUMED %lld %.6f\n", static_cast<long long>(s), now());
  }
  printf("DONE %lld %.6f\n", static_cast<long long>(s), now());
  hetcclCommDestroy(grown);
  return 0;
}

std::vector<int> waitDead(const std::string& dir) {
  const double until = now() + kWaitS;
  while (!exists(dir + "/dead")) {
    if (now() > until) {
      printf("ERROR dead no %s/dead after %.0f s\n", dir.c_str(), kWaitS);
      exit(3);
    }
    usleep(10000);
  }
  std::ifstream in(dir + "/dead");
  std::vector<int> dead;
  for (int r; in >> r;) dead.push_back(r);
  return dead;
}

int countJoined(const std::string& dir, int from, int to) {
  int n = 0;
  for (int r = from; r < to; ++r) n += exists(dir + "/join." + std::to_string(r));
  return n;
}

int train(const std::string& dir) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = hetcclCommInitFromEnv(&comm, nullptr);
  printf("INIT %d %.6f\n", r, now());
  if (r != hetcclSuccess) die(2, "init", nullptr);
  int world = 0, me = 0;
  hetcclCommCount(comm, &world);
  hetcclCommUserRank(comm, &me);
  std::vector<float> send(kCount), recv(kCount);
  int64_t s = 0;
  for (;; ++s) {
    r = step(comm, s, send, recv);
    if (r != hetcclSuccess) break;
    if ((s + 1) % 10 == 0) printf("ITER %lld %.6f\n", static_cast<long long>(s + 1), now());
  }
  printf("FAIL %lld %d %.6f %s\n", static_cast<long long>(s), r, now(), hetcclGetLastError(comm));
  std::vector<int> dead = waitDead(dir);
  for (int d : dead)
    if (d == me) {  // the agent counts this rank lost (its host was cut off): it leaves the job
      hetcclCommAbort(comm);
      printf("FENCED %.6f\n", now());
      return 0;
    }
  hetcclComm_t shrunk = nullptr;
  r = hetcclCommShrink(comm, dead.data(), static_cast<int>(dead.size()), &shrunk, nullptr, HETCCL_SHRINK_ABORT);
  if (r != hetcclSuccess) die(2, "shrink", comm);
  int n = 0, sr = 0;
  hetcclCommCount(shrunk, &n);
  hetcclCommUserRank(shrunk, &sr);
  syncStep(shrunk, &s);
  printf("SHRUNK %d %lld %.6f\n", n, static_cast<long long>(s), now());
  // Training goes on with n ranks; every step also tells whether all replacements are up (rank 0 looks).
  const double until = now() + kWaitS;
  for (;; ++s) {
    if (step(shrunk, s, send, recv) != hetcclSuccess) die(2, "shrunk-step", shrunk);
    int32_t ready = sr == 0 && countJoined(dir, n, world) == world - n ? 1 : 0;
    if (hetcclAllReduce(&ready, &ready, 1, hetcclInt32, hetcclSum, shrunk, nullptr) != hetcclSuccess)
      die(2, "ready", shrunk);
    if (ready) break;
    if (now() > until) {
      printf("ERROR replacements only %d of %d up after %.0f s\n", countJoined(dir, n, world), world - n, kWaitS);
      return 3;
    }
  }
  ++s;
  hetcclUniqueId id{};
  if (sr == 0) {
    if (hetcclCommGetUniqueId(shrunk, &id) != hetcclSuccess) die(2, "growid", shrunk);
    publish(dir + "/grow-id", &id, sizeof(id));
  }
  hetcclComm_t grown = nullptr;
  if (hetcclCommGrow(shrunk, world, sr == 0 ? &id : nullptr, -1, &grown, nullptr) != hetcclSuccess)
    die(2, "grow", shrunk);
  printf("GROWN %d %.6f\n", world, now());
  hetcclCommDestroy(shrunk);
  hetcclCommDestroy(comm);
  return trainGrown(grown, s);
}

// A replacement: says it is up, waits for the grow id, joins as `rank` with
// its group and transport from its own environment (HETCCL_GROUP: a new rank
// cannot take it from the running ranks' HETCCL_GROUP_MAP).
int join(const std::string& dir, int rank, int world) {
  std::string up = std::to_string(now());
  publish(dir + "/join." + std::to_string(rank), up.data(), up.size());
  hetcclUniqueId id{};
  const double until = now() + kWaitS;
  for (;;) {
    std::ifstream in(dir + "/grow-id", std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&id), sizeof(id))) break;
    if (now() > until) {
      printf("ERROR growid no %s/grow-id after %.0f s\n", dir.c_str(), kWaitS);
      return 3;
    }
    usleep(10000);
  }
  hetcclComm_t grown = nullptr;
  if (hetcclCommGrow(nullptr, world, &id, rank, &grown, nullptr) != hetcclSuccess) die(2, "grow", nullptr);
  printf("GROWN %d %.6f\n", world, now());
  return trainGrown(grown, 0);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "train") == 0) return train(argv[2]);
  if (argc == 5 && strcmp(argv[1], "join") == 0) return join(argv[2], atoi(argv[3]), atoi(argv[4]));
  fprintf(stderr, "usage: elastic_rank train DIR | join DIR RANK WORLD\n");
  return 1;
}
