#include "launch.h"

#include "forked_ranks.h"
#include "gpu.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace perf {
namespace {

using Clock = std::chrono::steady_clock;

bool isGpuKind(const std::string& kind) { return kind == "cuda" || kind == "hip" || kind == "emu"; }

// A GPU rank (cuda, hip, emu): its device (index mod the devices visible)
// becomes current before the communicator is created, which binds the rank
// to it.
bool startGpu(const std::string& kind, int rank, int index) {
  int n = Gpu::deviceCount(kind);
  if (n <= 0) {
    fprintf(stderr, "hetccl-perf: rank %d: a %s rank needs a visible device and its runtime\n", rank, kind.c_str());
    return false;
  }
  try {
    setToolGpu(new Gpu(kind, index % n));  // lives as long as the process
  } catch (const std::exception& e) {
    fprintf(stderr, "hetccl-perf: rank %d: %s\n", rank, e.what());
    return false;
  }
  return true;
}

// Runs body on an initialised communicator and tears the communicator down:
// destroyed after success, aborted after an exception so that no peer waits on it.
int runOnComm(hetcclComm_t comm, int rank, const RankBody& body) {
  int code = kExitError;
  try {
    code = body(comm);
  } catch (const std::exception& e) {
    fprintf(stderr, "hetccl-perf: rank %d: %s\n", rank, e.what());
    fflush(stdout);
    hetcclCommAbort(comm);
    return kExitError;
  }
  fflush(stdout);
  hetcclResult_t r = hetcclCommDestroy(comm);
  if (r != hetcclSuccess) {
    fprintf(stderr, "hetccl-perf: rank %d: hetcclCommDestroy failed: %s\n", rank, hetcclGetErrorString(r));
    if (code == kExitOk) code = kExitError;
  }
  return code;
}

hetcclConfig_t makeConfig(const Options& o, int rank) {
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  if (!o.groups.empty()) cfg.groupName = o.groups[static_cast<size_t>(rank)].c_str();
  if (!o.devices.empty()) cfg.device = o.devices[static_cast<size_t>(rank)].c_str();
  if (!o.transport.empty()) cfg.transport = o.transport.c_str();
  return cfg;
}

[[noreturn]] void childMain(const Options& o, const hetcclUniqueId& id, int rank, pid_t parent, const RankBody& body) {
  // Die with the parent, even if it died before this line.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitError);
  hetcclConfig_t cfg = makeConfig(o, rank);
  hetcclComm_t comm = nullptr;
  int code;
  if (!o.devices.empty() && isGpuKind(o.devices[static_cast<size_t>(rank)]) &&
      !startGpu(o.devices[static_cast<size_t>(rank)], rank, rank))
    _exit(kExitError);
  hetcclResult_t r = hetcclCommInitRankConfig(&comm, o.np, id, rank, &cfg);
  if (r != hetcclSuccess) {
    fprintf(stderr, "hetccl-perf: rank %d: hetcclCommInitRankConfig failed: %s: %s\n", rank, hetcclGetErrorString(r),
            hetcclGetLastError(nullptr));
    code = kExitError;
  } else {
    code = runOnComm(comm, rank, body);
  }
  fflush(stdout);
  fflush(stderr);
  // _exit: the parent's atexit handlers and the library's statics are not this child's to run.
  _exit(code);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// Waits for every rank. The first failure that is not "wrong results" (a
// clean, collective outcome) or the deadline gets the rest SIGTERM, then
// SIGKILL two seconds later.
int supervise(hetccl_tools::ForkedRanks& ranks, int timeoutS) {
  const auto start = Clock::now();
  bool killing = false;
  Clock::time_point hardKillAt{};
  int code = kExitOk;
  auto signalRest = [&](int sig) {
    for (int r = 0; r < ranks.size(); ++r) ranks.signal(r, sig);
  };
  auto startKilling = [&] {
    if (killing) return;
    killing = true;
    signalRest(SIGTERM);
    hardKillAt = Clock::now() + std::chrono::seconds(2);
  };
  std::vector<bool> seen(ranks.size(), false);
  while (!ranks.allEnded()) {
    ranks.pump(10, [](int, const std::string&) {});  // ranks print their own output
    for (int rank = 0; rank < ranks.size(); ++rank) {
      if (seen[rank] || !ranks.ended(rank)) continue;
      seen[rank] = true;
      const int status = ranks.status(rank);
      const bool clean = WIFEXITED(status) && (WEXITSTATUS(status) == kExitOk || WEXITSTATUS(status) == kExitWrong);
      if (clean) {
        if (code == kExitOk) code = WEXITSTATUS(status);
        continue;
      }
      if (killing) continue;  // its death is what we caused
      fprintf(stderr, "hetccl-perf: rank %d %s; stopping the other ranks\n", rank, describe(status).c_str());
      code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
      startKilling();
    }
    if (!killing && timeoutS > 0 && Clock::now() - start > std::chrono::seconds(timeoutS)) {
      fprintf(stderr, "hetccl-perf: ranks still running after --timeout %d s: killing them\n", timeoutS);
      code = kExitTimeout;
      startKilling();
    }
    if (killing && Clock::now() > hardKillAt) signalRest(SIGKILL);
  }
  return code;
}

}  // namespace

int launchLocal(const Options& o, const RankBody& body) {
  // The id is made after the fork (forked_ranks.h says why).
  const pid_t parent = getpid();
  hetccl_tools::ForkedRanks ranks;
  std::string error;
  if (!ranks.start(
          o.np, true,
          [&](int rank, int, int idFd) {
            hetcclUniqueId id;
            if (!hetccl_tools::readId(idFd, &id)) _exit(kExitError);
            childMain(o, id, rank, parent, body);
          },
          &error)) {
    fprintf(stderr, "hetccl-perf: starting the ranks: %s\n", error.c_str());
    return kExitError;
  }
  hetcclUniqueId id;
  hetcclResult_t r = hetcclGetUniqueId(&id);
  if (r != hetcclSuccess) {
    fprintf(stderr, "hetccl-perf: hetcclGetUniqueId failed: %s: %s\n", hetcclGetErrorString(r),
            hetcclGetLastError(nullptr));
    return kExitError;  // ranks' destructor kills them
  }
  if (!ranks.sendId(id)) fprintf(stderr, "hetccl-perf: could not hand the id to a rank: %s\n", strerror(errno));
  return supervise(ranks, o.timeoutS);
}

int launchFromEnv(const Options& o, const RankBody& body) {
  hetcclConfig_t cfg = makeConfig(o, 0);
  const char* dev = getenv("HETCCL_DEVICE");
  if (dev && isGpuKind(dev)) {
    const char* local = getenv("LOCAL_RANK");
    if (!local) local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local) local = getenv("SLURM_LOCALID");
    if (!startGpu(dev, -1, local ? atoi(local) : 0)) return kExitError;
  }
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = hetcclCommInitFromEnv(&comm, &cfg);
  if (r != hetcclSuccess) {
    fprintf(stderr,
            "hetccl-perf: hetcclCommInitFromEnv failed: %s: %s\n(run under torchrun, mpirun or srun, or "
            "use --np N to fork N local ranks)\n",
            hetcclGetErrorString(r), hetcclGetLastError(nullptr));
    return kExitError;
  }
  int rank = -1;
  hetcclCommUserRank(comm, &rank);
  return runOnComm(comm, rank, body);
}

}  // namespace perf
