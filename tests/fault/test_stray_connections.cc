// Fault 6: stray, malformed and unauthenticated connections to a live job.
//
// A separate process (fault_stray_client) finds the job's listening sockets
// (the rendezvous root in this process, each rank's bootstrap ring and TCP
// transport listeners, and those of communicators made by hetcclCommSplit)
// through /proc and attacks them over loopback while the ranks initialise,
// run 200 checked AllReduce/AllGather calls and split. The job must not
// notice: every result correct, no rank error, every malformed connection
// dropped by the server (none left open 3 s after the attack), and no
// socket left behind in the ranks. A communicator keeps no listener once it
// is made, so "while it runs collectives" means the listeners of the
// communicators that hetcclCommSplit makes on the live one.
//
// The rendezvous, ring and transport listeners exist only while a
// communicator is being made, so rank 3 holds back twice, inside
// HETCCL_TIMEOUT_S = 5 s: before its init (the others wait in the
// rendezvous with their ring listeners open) until the attack has had 1,000
// connections, and right after its first transport connect (the others'
// transport listeners wait for it) for a few hundred more; and once more in
// its first split, right after it connects to the split's root (rank 1's new
// root and ring listeners wait for it), so that a split communicator's
// listeners are surely seen and attacked.
//
// SilentClients: a few connections that send nothing and stay open longer
// than HETCCL_TIMEOUT_S, placed on the listeners before the real peers
// connect. A stray idle client must not delay or break communicator init.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "connect_hook.h"
#include "fault_job.h"

#ifndef FAULT_STRAY_CLIENT
#error "FAULT_STRAY_CLIENT must be the path of fault_stray_client"
#endif

namespace hfault {
namespace {

// The attacker process: stdin held open by us (it stops when we close it),
// stdout read for its progress and summary.
class Attacker {
 public:
  bool start(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      std::vector<char*> argv;
      std::string path = FAULT_STRAY_CLIENT;
      argv.push_back(path.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_ = in[1];
    out_ = out[0];
    fcntl(out_, F_SETFL, O_NONBLOCK);
    return true;
  }

  void poll() {
    char buf[4096];
    for (;;) {
      ssize_t n = read(out_, buf, sizeof(buf));
      if (n <= 0) break;
      pending_.append(buf, static_cast<size_t>(n));
    }
    size_t at;
    while ((at = pending_.find('\n')) != std::string::npos) {
      std::string line = pending_.substr(0, at);
      pending_.erase(0, at + 1);
      long a, e;
      size_t p;
      if (sscanf(line.c_str(), "progress %ld %ld %zu", &a, &e, &p) == 3) {
        attempted = a;
        established = e;
        ports = p;
      } else if (line.rfind("summary ", 0) == 0) {
        summary = line;
      } else if (line.rfind("port ", 0) == 0) {
        Listener l;
        if (sscanf(line.c_str(), "port %d %d %d %ld %lf", &l.port, &l.pid, &l.service, &l.hits, &l.firstSeen) == 5)
          listeners.push_back(l);
      }
    }
  }

  // Stops it and returns its summary as key -> value.
  std::map<std::string, long> stop() {
    if (in_ >= 0) close(in_);
    in_ = -1;
    fcntl(out_, F_SETFL, 0);
    char buf[4096];
    ssize_t n;
    while ((n = read(out_, buf, sizeof(buf))) > 0) pending_.append(buf, static_cast<size_t>(n));
    poll();
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    exitStatus = st;
    std::map<std::string, long> out;
    std::stringstream ss(summary);
    std::string tok;
    while (ss >> tok) {
      size_t eq = tok.find('=');
      if (eq != std::string::npos) out[tok.substr(0, eq)] = atol(tok.substr(eq + 1).c_str());
    }
    return out;
  }

  ~Attacker() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
  }

  struct Listener {
    int port = 0, pid = 0, service = 0;
    long hits = 0;
    double firstSeen = 0;  // CLOCK_MONOTONIC, as now()
  };
  std::vector<Listener> listeners;  // every one it found, after stop()
  long attempted = 0, established = 0;
  size_t ports = 0;
  std::string summary;
  int exitStatus = -1;

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string pending_;
};

std::string hexId(const hetcclUniqueId& id) {
  std::string s;
  char b[3];
  for (char c : id.internal) {
    snprintf(b, sizeof(b), "%02x", static_cast<unsigned char>(c));
    s += b;
  }
  return s;
}

size_t openSockets() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    struct stat st;
    if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISSOCK(st.st_mode)) ++n;
  }
  closedir(d);
  return n;
}

// Ranks take SIGUSR1 only through waitForParent(): rank 3 waits for it
// before it starts init, every rank before it destroys its communicator.
void blockParentSignal() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigprocmask(SIG_BLOCK, &s, nullptr);
}

void waitForParent(RankCtx& ctx, const std::string& what) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  ctx.report(what, now());
  timespec ts{30, 0};
  sigtimedwait(&s, nullptr, &ts);
  ctx.report(what + ".released", now());
}

// Checked collectives on comm: AllReduce (int32 sums, exact) on even i,
// AllGather on odd i, sizes from 1 element to 96K (small and large plans).
// Returns the number of failed calls; counts wrong elements in *wrong.
int checkedCollectives(RankCtx& ctx, hetcclComm_t comm, int rank, int nranks, int calls, int salt, long* wrong,
                       const std::string& key) {
  int failed = 0;
  std::vector<int32_t> in, out;
  for (int i = 0; i < calls; ++i) {
    const size_t n = 1 + (static_cast<size_t>(i) * 7919u + static_cast<size_t>(salt) * 104729u) % (96 * 1024);
    hetcclResult_t r;
    if (i % 2 == 0) {
      in.resize(n);
      out.assign(n, -1);
      for (size_t j = 0; j < n; ++j) in[j] = rank * 1000 + i + static_cast<int32_t>(j % 7) + salt;
      r = hetcclAllReduce(in.data(), out.data(), n, hetcclInt32, hetcclSum, comm, nullptr);
      if (r == hetcclSuccess)
        for (size_t j = 0; j < n; ++j) {
          int32_t want = 1000 * nranks * (nranks - 1) / 2 + nranks * (i + static_cast<int32_t>(j % 7) + salt);
          if (out[j] != want) ++*wrong;
        }
    } else {
      in.resize(n);
      out.assign(n * nranks, -1);
      for (size_t j = 0; j < n; ++j) in[j] = rank * 1000000 + i * 10 + static_cast<int32_t>(j % 13) + salt;
      r = hetcclAllGather(in.data(), out.data(), n, hetcclInt32, comm, nullptr);
      if (r == hetcclSuccess)
        for (int k = 0; k < nranks; ++k)
          for (size_t j = 0; j < n; ++j)
            if (out[k * n + j] != k * 1000000 + i * 10 + static_cast<int32_t>(j % 13) + salt) ++*wrong;
    }
    if (r != hetcclSuccess) {
      if (failed++ == 0) ctx.reportCall(key + ".fail", r, comm);
      break;  // the communicator is broken now
    }
  }
  return failed;
}

// Splits between two blocks of collectives.
constexpr int kSplitsPerGap = 3;

int floodBody(RankCtx& ctx, int collectives) {
  blockParentSignal();
  if (ctx.rank == 3) {
    waitForParent(ctx, "held");
    // Hold again right after the first TCP transport connect (to rank 0):
    // the other ranks' transport listeners are open and waiting for rank 3.
    armAfterConnect(3, [&ctx] { waitForParent(ctx, "held2"); });
  }
  hetcclComm_t comm = nullptr;
  ctx.report("init.t0", now());
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  long wrong = 0;
  int failed = 0, splits = 0;
  for (int block = 0; block < collectives / 50 && !failed; ++block) {
    failed += checkedCollectives(ctx, comm, ctx.rank, ctx.nranks, 50, block, &wrong, "coll");
    if (failed || block == collectives / 50 - 1) break;
    // New communicators of the live one: new root, ring and transport
    // listeners for the attacker to find. They are open only while the
    // split sets up, so several splits, spread out, give its scan (every
    // 2 ms, slower on a loaded machine) enough chances.
    for (int k = 0; k < kSplitsPerGap && !failed; ++k) {
      // First split: rank 3 holds right after it connects to its new
      // communicator's root (run by rank 1, the first of color 1), so that
      // root and rank 1's new ring listener stay open for the attacker.
      if (ctx.rank == 3 && block == 0 && k == 0) armAfterConnect(1, [&ctx] { waitForParent(ctx, "held3"); });
      hetcclComm_t sub = nullptr;
      r = hetcclCommSplit(comm, ctx.rank % 2, ctx.rank, &sub, nullptr);
      if (r != hetcclSuccess) {
        ctx.reportCall("split", r, comm);
        ++failed;
        break;
      }
      int subRank = -1, subN = 0;
      hetcclCommUserRank(sub, &subRank);
      hetcclCommCount(sub, &subN);
      failed += checkedCollectives(ctx, sub, subRank, subN, 6, 100 + block * kSplitsPerGap + k, &wrong, "subcoll");
      r = hetcclCommDestroy(sub);
      if (r != hetcclSuccess) ctx.reportCall("subdestroy", r, nullptr), ++failed;
      ++splits;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  }
  ctx.report("splits", splits);
  ctx.report("failed", failed);
  ctx.report("wrong", static_cast<long long>(wrong));
  // Stray connections the library accepted must be gone: a live 4-rank TCP
  // communicator holds its 2 bootstrap ring sockets and 3 transport sockets.
  ctx.report("sockets", static_cast<long long>(openSockets()));
  // Stay alive, communicator and all, while the attacker counts the
  // connections that were never dropped.
  waitForParent(ctx, "finished");
  r = hetcclCommDestroy(comm);
  ctx.reportCall("destroy", r, nullptr);
  return failed || wrong || r != hetcclSuccess ? 1 : 0;
}

JobSpec strayJobSpec() {
  JobSpec spec;
  spec.layout = "a,a,b,b";
  spec.transport = "tcp";
  spec.timeoutS = 5;
  // Every listener of the job on loopback, where the attacker connects.
  spec.env = {{"HETCCL_SOCKET_IFNAME", "lo"}};
  return spec;
}

std::vector<std::string> pidsArg(const Job& job) {
  std::string pids = std::to_string(getpid());
  for (int r = 0; r < job.nranks(); ++r) pids += "," + std::to_string(job.pid(r));
  return {"--pids", pids};
}

TEST(StrayConnections, MalformedFloodWhileInitCollectivesAndSplits) {
  constexpr long kTarget = 1000;  // malformed connections delivered during init
  constexpr int kCollectives = 200;
  JobSpec spec = strayJobSpec();
  const double t0 = now();
  Job job(spec, [](RankCtx& ctx) { return floodBody(ctx, kCollectives); });
  ASSERT_TRUE(job.started()) << job.startError();
  Attacker attacker;
  std::vector<std::string> args = pidsArg(job);
  args.insert(args.end(), {"--id", hexId(job.id()), "--mode", "flood", "--threads", "6"});
  ASSERT_TRUE(attacker.start(args));

  // Hold rank 3 until the attack delivered its connections, but release it
  // well before the others' 5 s rendezvous timeout (counted from the id).
  job.waitUntil(
      [&] {
        attacker.poll();
        return job.has(3, "held") && attacker.established >= kTarget;
      },
      3.0 - (now() - t0));
  const long duringInit = attacker.established;
  const double releasedAfter = now() - t0;
  job.signal(3, SIGUSR1);
  // Second hold: the transport listeners (their accept timeout is 5 s too),
  // for at least 1 s (the attacker must see them first: it scans /proc) and
  // until the attack has its 1,000 connections in all and 300 more here.
  const double t1 = now();
  job.waitUntil(
      [&] {
        attacker.poll();
        return job.has(3, "held2") && now() - job.getD(3, "held2") >= 1.0 &&
               attacker.established >= std::max(kTarget + 100, duringInit + 300);
      },
      3.5);
  const long duringTransport = attacker.established - duringInit;
  const double released2After = now() - t1;
  job.signal(3, SIGUSR1);
  // Third hold, in rank 3's first split (its peers' new listeners wait for
  // it; their timeouts are 5 s): at least 1 s and 200 connections more.
  long atHeld3 = -1;
  job.waitUntil(
      [&] {
        attacker.poll();
        if (!job.has(3, "held3")) return false;
        if (atHeld3 < 0) atHeld3 = attacker.established;
        return now() - job.getD(3, "held3") >= 1.0 && attacker.established >= atHeld3 + 200;
      },
      6.0);
  const long duringSplit = atHeld3 < 0 ? 0 : attacker.established - atHeld3;
  if (atHeld3 >= 0) job.signal(3, SIGUSR1);
  bool finished = job.waitUntil(
      [&] {
        attacker.poll();
        for (int r = 0; r < job.nranks(); ++r)
          if (!job.has(r, "finished") && !job.end(r).ended) return false;
        return true;
      },
      90);
  auto sum = attacker.stop();  // stops attacking; waits up to 3 s for the server to drop what it sent
  for (int r = 0; r < job.nranks(); ++r) job.signal(r, SIGUSR1);
  EXPECT_TRUE(job.finish(20) && finished) << job.describe();
  printf(
      "[fault] stray connections: %ld delivered while rank 3 was held before init (released after %.2f s), "
      "%ld while it was held in the transport setup (%.2f s), %ld while it was held in its first split\n[fault] %s\n",
      duringInit, releasedAfter, duringTransport, released2After, duringSplit, attacker.summary.c_str());

  for (int r = 0; r < job.nranks(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankEnd& e = job.end(r);
    EXPECT_TRUE(e.ended && !e.hung && e.signal == 0 && e.exitCode == 0) << job.describe();
    EXPECT_EQ(job.get(r, "init.code"), "0") << job.get(r, "init.err");
    EXPECT_EQ(job.get(r, "failed"), "0") << job.describe();
    EXPECT_EQ(job.get(r, "wrong"), "0") << job.describe();
    EXPECT_EQ(job.get(r, "splits"), std::to_string((kCollectives / 50 - 1) * kSplitsPerGap)) << job.describe();
    EXPECT_EQ(job.get(r, "destroy.code"), "0") << job.get(r, "destroy.err");
    const int sockets = atoi(job.get(r, "sockets").c_str());
    EXPECT_GE(sockets, 1) << "could not count this rank's sockets";
    EXPECT_LE(sockets, 5) << "open sockets after the attack (leaked stray connections?)";
    printf(
        "[fault]   rank %d: init %s, %s failed calls (of %d + %d x 6 on split communicators), %s wrong elements, %s "
        "splits, "
        "%d sockets open at the end\n",
        r, job.get(r, "init.code") == "0" ? "ok" : job.get(r, "init.err").c_str(), job.get(r, "failed").c_str(),
        kCollectives, (kCollectives / 50 - 1) * kSplitsPerGap, job.get(r, "wrong").c_str(),
        job.get(r, "splits").c_str(), sockets);
  }
  ASSERT_FALSE(attacker.summary.empty()) << "the attacker printed no summary (exit status " << attacker.exitStatus
                                         << ")";
  // Which listeners were hit, told apart by owner and by when they opened:
  // the root (this process), the ring listeners of ranks 0-2 (open before
  // rank 3 was first released) and their transport listeners (opened while
  // rank 3 was on its way to, or held in, its transport setup).
  const double release1 = job.getD(3, "held.released"), release2 = job.getD(3, "held2.released");
  int rootHit = 0, ringHit = 0, transportHit = 0, splitHit = 0, otherHit = 0, splitSeen = 0;
  for (const auto& l : attacker.listeners) {
    if (l.firstSeen > release2) ++splitSeen;
    if (l.hits == 0) continue;
    bool early = l.pid == job.pid(0) || l.pid == job.pid(1) || l.pid == job.pid(2);
    if (l.pid == getpid())
      ++rootHit;
    else if (early && l.firstSeen < release1)
      ++ringHit;
    else if (early && l.firstSeen < release2)
      ++transportHit;
    else if (l.firstSeen > release2)
      ++splitHit;  // made by hetcclCommSplit on the live communicator
    else
      ++otherHit;  // rank 3's own ring and transport listeners
  }
  printf(
      "[fault] listeners hit: root %d, ring (ranks 0-2) %d, transport (ranks 0-2) %d, of split communicators "
      "%d, rank 3's %d\n",
      rootHit, ringHit, transportHit, splitHit, otherHit);
  EXPECT_GE(sum["established"], kTarget) << "fewer than " << kTarget << " connections reached the job's listeners";
  EXPECT_GT(duringInit, 0);
  EXPECT_GT(duringTransport, 0);
  std::string table;
  for (const auto& l : attacker.listeners) {
    char line[160];
    snprintf(line, sizeof(line),
             "\n  port %d pid %d service %d: %ld connections, opened %+.3f s after rank 3's first release", l.port,
             l.pid, l.service, l.hits, l.firstSeen - release1);
    table += line;
  }
  SCOPED_TRACE("rank pids " + std::to_string(job.pid(0)) + " " + std::to_string(job.pid(1)) + " " +
               std::to_string(job.pid(2)) + " " + std::to_string(job.pid(3)) + "; second release " +
               std::to_string(release2 - release1) + " s after the first; listeners:" + table);
  EXPECT_EQ(rootHit, 1) << "the rendezvous root was not attacked";
  EXPECT_EQ(ringHit, 3) << "the held ranks' ring listeners were not all attacked";
  EXPECT_EQ(transportHit, 3) << "the transport listeners waiting for rank 3 were not all attacked";
  EXPECT_TRUE(job.has(3, "held3")) << "rank 3 never connected to its first split's root";
  EXPECT_GT(duringSplit, 0);
  EXPECT_GE(splitHit, 1) << "no listener of a split communicator was attacked (" << splitSeen << " seen)";
  EXPECT_TRUE(job.has(3, "held2")) << "rank 3 never made its first transport connection";
  EXPECT_GE(sum["authenticated"], 1) << "no authenticated malformed request got through the handshake";
  EXPECT_GT(sum["dropped_by_server"], 0);
  EXPECT_EQ(sum["kept_open"], 0) << "malformed connections the job never dropped";
}

struct SilentCase {
  const char* targets;  // root | ranks
};

void PrintTo(const SilentCase& c, std::ostream* os) { *os << c.targets; }

class SilentClients : public ::testing::TestWithParam<SilentCase> {};

TEST_P(SilentClients, DoNotDelayInit) {
  const SilentCase sc = GetParam();
  JobSpec spec = strayJobSpec();
  const double t0 = now();
  Job job(spec, [](RankCtx& ctx) {
    blockParentSignal();
    if (ctx.rank == 3) waitForParent(ctx, "held");
    hetcclComm_t comm = nullptr;
    ctx.report("init.t0", now());
    hetcclResult_t r = ctx.init(&comm);
    ctx.reportCall("init", r, nullptr);
    if (r != hetcclSuccess) return 2;
    long wrong = 0;
    int failed = checkedCollectives(ctx, comm, ctx.rank, ctx.nranks, 10, 7, &wrong, "coll");
    ctx.report("failed", failed);
    ctx.report("wrong", static_cast<long long>(wrong));
    hetcclCommDestroy(comm);
    return failed || wrong ? 1 : 0;
  });
  ASSERT_TRUE(job.started()) << job.startError();
  Attacker attacker;
  std::vector<std::string> args = pidsArg(job);
  // Idle for 8 s: longer than HETCCL_TIMEOUT_S, shorter than the server's own
  // 10 s handshake limit.
  args.insert(args.end(), {"--id", hexId(job.id()), "--mode", "silent", "--per-port", "2", "--hold-ms", "8000",
                           "--targets", sc.targets});
  ASSERT_TRUE(attacker.start(args));
  const long want = std::string(sc.targets) == "root" ? 2 : 6;  // 2 on the root, or on each held rank's ring listener
  job.waitUntil(
      [&] {
        attacker.poll();
        return job.has(3, "held") && attacker.established >= want;
      },
      2.0 - (now() - t0));
  const long placed = attacker.established;
  job.signal(3, SIGUSR1);
  bool noHang = job.waitUntil(
      [&] {
        attacker.poll();
        for (int r = 0; r < job.nranks(); ++r)
          if (!job.end(r).ended) return false;
        return true;
      },
      30);
  auto sum = attacker.stop();
  EXPECT_TRUE(job.finish(1) && noHang) << job.describe();
  printf("[fault] silent clients on %s listeners: %ld placed before rank 3 joined\n[fault] %s\n", sc.targets, placed,
         attacker.summary.c_str());
  EXPECT_GE(placed, want) << "the silent clients were not in place in time: nothing was tested";
  for (int r = 0; r < job.nranks(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const double took = job.getD(r, "init.t") - job.getD(r, "init.t0");
    printf("[fault]   rank %d: init returned %s after %.3f s: %s\n", r, job.get(r, "init.code").c_str(), took,
           job.get(r, "init.err").c_str());
    EXPECT_EQ(job.get(r, "init.code"), "0") << "a silent stray client broke init: " << job.get(r, "init.err");
    EXPECT_EQ(job.get(r, "failed"), "0") << job.describe();
    EXPECT_EQ(job.get(r, "wrong"), "0") << job.describe();
    EXPECT_EQ(job.end(r).exitCode, 0) << job.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Fault, SilentClients, ::testing::Values(SilentCase{"root"}, SilentCase{"ranks"}),
                         [](const ::testing::TestParamInfo<SilentCase>& i) { return std::string(i.param.targets); });

}  // namespace
}  // namespace hfault
