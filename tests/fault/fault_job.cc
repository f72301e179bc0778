#include "fault_job.h"

#include "forked_ranks.h"
#include "free_port.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <sstream>

namespace hfault {
namespace {

int gReportFd = -1;
std::mutex gReportMu;

void sendLine(const std::string& key, const std::string& value) {
  if (gReportFd < 0) return;
  std::string line = key + '\t';
  for (char c : value) line += (c == '\n' || c == '\t') ? ' ' : c;
  line += '\n';
  std::lock_guard<std::mutex> g(gReportMu);
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t w = write(gReportFd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    left -= static_cast<size_t>(w);
  }
}

// The parent may host the rendezvous root (hetcclGetUniqueId): a rank that
// kept its listening socket would keep it accepting after the parent closed
// it. Ranks get only the sockets they make themselves.
void closeInheritedSockets(int keep) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  std::vector<int> close_;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (fd <= 2 || fd == keep || fd == dirfd(d)) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) close_.push_back(fd);
  }
  closedir(d);
  for (int fd : close_) close(fd);
}

[[noreturn]] void runRank(const JobSpec& spec, int rank, const hetcclUniqueId& id, const Job::Body& body,
                          pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(99);
  closeInheritedSockets(gReportFd);
  setenv("HETCCL_TIMEOUT_S", std::to_string(spec.timeoutS).c_str(), 1);
  for (const auto& [k, v] : spec.env) setenv(k.c_str(), v.c_str(), 1);
  if (!spec.stderrDir.empty()) {
    std::string path = spec.stderrDir + "/rank" + std::to_string(rank) + ".log";
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
  }
  RankCtx ctx;
  ctx.rank = rank;
  ctx.nranks = static_cast<int>(parseLayout(spec.layout).size());
  ctx.group = parseLayout(spec.layout)[rank];
  ctx.transport = spec.transport;
  ctx.id = id;
  ctx.timeoutS = spec.timeoutS;
  int code = 0;
  try {
    code = body(ctx);
  } catch (const std::exception& e) {
    ctx.report("exception", e.what());
    code = 90;
  } catch (...) {
    ctx.report("exception", "unknown");
    code = 91;
  }
  ctx.report("exit", code);
  fflush(nullptr);
  _exit(code);
}

}  // namespace

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void RankCtx::report(const std::string& key, const std::string& value) const { sendLine(key, value); }
void RankCtx::report(const std::string& key, double value) const {
  char b[64];
  snprintf(b, sizeof(b), "%.6f", value);
  sendLine(key, b);
}
void RankCtx::report(const std::string& key, long long value) const { sendLine(key, std::to_string(value)); }

void RankCtx::reportCall(const std::string& key, hetcclResult_t r, hetcclComm_t comm) const {
  double t = now();
  report(key + ".code", static_cast<long long>(r));
  report(key + ".err", std::string(hetcclGetLastError(comm)));
  report(key + ".t", t);
}

hetcclResult_t RankCtx::init(hetcclComm_t* comm, int blocking) const {
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.groupName = group.c_str();
  cfg.transport = transport.c_str();
  cfg.blocking = blocking;
  return hetcclCommInitRankConfig(comm, nranks, id, rank, &cfg);
}

std::string RankEnd::describe() const {
  std::ostringstream os;
  os << "pid " << pid << ": ";
  if (hung)
    os << "HUNG (killed at the deadline)";
  else if (!ended)
    os << "still running";
  else if (signal)
    os << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  else
    os << "exit code " << exitCode;
  for (const auto& l : log) os << "\n      " << l;
  return os.str();
}

Job::Job(const JobSpec& spec, Body body) : spec_(spec) {
  const auto layout = parseLayout(spec.layout);
  const int n = static_cast<int>(layout.size());
  // The root runs in this process when it makes the id: it must see the
  // ranks' timeout and interface choice.
  setenv("HETCCL_TIMEOUT_S", std::to_string(spec.timeoutS).c_str(), 1);
  if (spec.makeId) {
    std::vector<std::pair<std::string, std::string>> saved;
    for (const auto& [k, v] : spec.env) {
      const char* old = getenv(k.c_str());
      saved.emplace_back(k, old ? old : std::string("\x01"));
      setenv(k.c_str(), v.c_str(), 1);
    }
    hetcclResult_t r = hetcclGetUniqueId(&id_);
    for (const auto& [k, v] : saved) {
      if (v == "\x01")
        unsetenv(k.c_str());
      else
        setenv(k.c_str(), v.c_str(), 1);
    }
    if (r != hetcclSuccess) {
      startError_ = std::string("hetcclGetUniqueId: ") + hetcclGetLastError(nullptr);
      return;
    }
  }
  ranks_.resize(n);
  const pid_t parent = getpid();
  started_ = procs_.start(
      n, false,
      [&](int rank, int reportFd, int) {
        gReportFd = reportFd;
        runRank(spec, rank, id_, body, parent);
      },
      &startError_);
  for (int i = 0; started_ && i < n; ++i) ranks_[i].pid = procs_.pid(i);
}

Job::~Job() = default;  // procs_ kills the ranks still running

void Job::pump(int waitMs) {
  procs_.pump(waitMs, [this](int rank, const std::string& line) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return;
    ranks_[rank].reports[line.substr(0, tab)] = line.substr(tab + 1);
    ranks_[rank].log.push_back(line.substr(0, tab) + " = " + line.substr(tab + 1));
  });
  for (int i = 0; i < nranks(); ++i) {
    RankEnd& r = ranks_[i];
    if (r.ended || !procs_.ended(i)) continue;
    r.ended = true;
    const int st = procs_.status(i);
    if (WIFSIGNALED(st))
      r.signal = WTERMSIG(st);
    else
      r.exitCode = WEXITSTATUS(st);
  }
}

bool Job::waitUntil(const std::function<bool()>& pred, double timeoutS) {
  double until = now() + timeoutS;
  for (;;) {
    pump(0);
    if (pred()) return true;
    if (now() >= until) return false;
    pump(10);
  }
}

std::string Job::get(int r, const std::string& key) const {
  auto it = ranks_[r].reports.find(key);
  return it == ranks_[r].reports.end() ? std::string() : it->second;
}

double Job::getD(int r, const std::string& key) const {
  auto it = ranks_[r].reports.find(key);
  return it == ranks_[r].reports.end() ? NAN : atof(it->second.c_str());
}

void Job::signal(int r, int sig) {
  pump(0);  // reports written before the signal are not lost with it
  procs_.signal(r, sig);
}

bool Job::finish(double timeoutS) {
  waitUntil(
      [&] {
        for (const auto& r : ranks_)
          if (!r.ended) return false;
        return true;
      },
      timeoutS);
  pump(0);
  const std::vector<int> hung = procs_.killRemaining();
  for (int i : hung) {
    ranks_[i].ended = true;
    ranks_[i].hung = true;
    ranks_[i].signal = SIGKILL;
  }
  pump(0);  // what they wrote before they ended
  return hung.empty();
}

std::string Job::describe() const {
  std::ostringstream os;
  os << "job [" << spec_.layout << " " << spec_.transport << "]:";
  for (int i = 0; i < nranks(); ++i) os << "\n  rank " << i << " " << ranks_[i].describe();
  return os.str();
}

int freePortPair() { return hetccl_test::freePortPair(); }

std::vector<int> ranksNamed(const std::string& text) {
  std::vector<int> out;
  static const std::regex re("rank ([0-9]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoi((*it)[1]));
  return out;
}

}  // namespace hfault
