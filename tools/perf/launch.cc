#include "launch.h"

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

// Waits for every child. The first failure that is not "wrong results" (a
// clean, collective outcome) or the deadline gets the rest SIGTERM, then
// SIGKILL two seconds later.
int supervise(std::vector<pid_t>& pids, int timeoutS) {
  const auto start = Clock::now();
  bool killing = false;
  Clock::time_point hardKillAt{};
  int code = kExitOk;
  size_t left = pids.size();
  auto signalRest = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) kill(p, sig);
  };
  auto startKilling = [&] {
    if (killing) return;
    killing = true;
    signalRest(SIGTERM);
    hardKillAt = Clock::now() + std::chrono::seconds(2);
  };
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: none left
    }
    if (pid == 0) {
      if (!killing && timeoutS > 0 && Clock::now() - start > std::chrono::seconds(timeoutS)) {
        fprintf(stderr, "hetccl-perf: ranks still running after --timeout %d s: killing them\n", timeoutS);
        code = kExitTimeout;
        startKilling();
      }
      if (killing && Clock::now() > hardKillAt) signalRest(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    size_t rank = 0;
    while (rank < pids.size() && pids[rank] != pid) ++rank;
    if (rank == pids.size()) continue;
    pids[rank] = -1;
    --left;
    bool clean = WIFEXITED(status) && (WEXITSTATUS(status) == kExitOk || WEXITSTATUS(status) == kExitWrong);
    if (clean) {
      if (code == kExitOk) code = WEXITSTATUS(status);
      continue;
    }
    if (killing) continue;  // its death is what we caused
    fprintf(stderr, "hetccl-perf: rank %zu %s; stopping the other ranks\n", rank, describe(status).c_str());
    code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitError;
    startKilling();
  }
  return code;
}

}  // namespace

// Reads the unique id the parent sends once every rank exists; false when the
// parent went away first.
static bool readId(int fd, hetcclUniqueId* id) {
  size_t got = 0;
  while (got < sizeof(*id)) {
    ssize_t n = read(fd, id->internal + got, sizeof(*id) - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

int launchLocal(const Options& o, const RankBody& body) {
  // Ranks are forked before the parent makes the id: hetcclGetUniqueId starts
  // the rendezvous thread, and a fork after a thread started can inherit a
  // lock that thread holds (seen with ASan's allocator).
  fflush(stdout);
  fflush(stderr);
  const pid_t parent = getpid();
  std::vector<pid_t> pids;
  std::vector<int> idPipes;
  for (int rank = 0; rank < o.np; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) {
      fprintf(stderr, "hetccl-perf: pipe: %s\n", strerror(errno));
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      return kExitError;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      for (int w : idPipes) close(w);
      hetcclUniqueId id;
      if (!readId(fds[0], &id)) _exit(kExitError);
      close(fds[0]);
      childMain(o, id, rank, parent, body);
    }
    close(fds[0]);
    if (pid < 0) {
      fprintf(stderr, "hetccl-perf: fork of rank %d failed: %s\n", rank, strerror(errno));
      close(fds[1]);
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      return kExitError;
    }
    pids.push_back(pid);
    idPipes.push_back(fds[1]);
  }
  hetcclUniqueId id;
  hetcclResult_t r = hetcclGetUniqueId(&id);
  if (r != hetcclSuccess) {
    fprintf(stderr, "hetccl-perf: hetcclGetUniqueId failed: %s: %s\n", hetcclGetErrorString(r),
            hetcclGetLastError(nullptr));
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    return kExitError;
  }
  for (int w : idPipes) {
    if (write(w, id.internal, sizeof(id)) != static_cast<ssize_t>(sizeof(id)))
      fprintf(stderr, "hetccl-perf: could not hand the id to a rank: %s\n", strerror(errno));
    close(w);
  }
  return supervise(pids, o.timeoutS);
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
