// The ofi transport (libfabric) beyond the matrix and the failures suite:
// messages of many parts, encrypted links, RMA writes (that they happen, and
// the fallback where a rank lacks FI_RMA), and what goes wrong at init (an
// unknown provider, a missing library, ranks on different providers). Over
// Debian's libfabric 1.17 tcp provider on the loopback and its shm provider:
// EFA and Slingshot's cxi cannot be had on the machines these tests run on.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"
#include "peer_exit.h"
#include "layouts.h"

namespace hmp {
namespace {

#if HETCCL_HAVE_OFI

hetcclCommInfo_t infoOf(const Rank& r) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  EXPECT_EQ(hetcclCommGetInfo(r.comm, &info), hetcclSuccess) << hetcclGetLastError(r.comm);
  return info;
}

// A sum AllReduce of `count` floats, in place, checked at both ends and the middle.
void largeAllReduce(const Rank& r, size_t count) {
  std::vector<float> x(count, 1.0f + r.rank);
  r.progress("AllReduce of " + std::to_string(count) + " floats");
  HC_ASSERT_OK(hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, r.comm, nullptr), r.comm);
  const float want = r.nranks * (r.nranks + 1) / 2.0f;
  EXPECT_EQ(x.front(), want);
  EXPECT_EQ(x[count / 2 + 1], want);
  EXPECT_EQ(x.back(), want);
}

// Every collective at a size inside one part and one that spans several
// records, out of place and in place.
void everyCollective(const Rank& r) {
  Checker ck(r);
  uint64_t seed = 11;
  for (Coll coll : allColls())
    for (size_t count : {size_t{5}, size_t{300000}})
      for (bool inPlace : {false, true}) {
        Check c;
        c.coll = coll;
        c.count = count;
        c.inPlace = inPlace;
        c.root = static_cast<int>(seed % r.nranks);
        c.seed = ++seed;
        ck.run(c);
      }
}

// Runs the current test again in a process of its own with `env` set from
// its start: the logger reads its level once per process, and forked ranks
// inherit what the test process read. Returns true in that process, where
// the test goes on; false in the caller, which then returns.
bool inFreshProcess(const std::vector<std::pair<std::string, std::string>>& env) {
  if (getenv("HETCCL_TEST_FRESH_PROCESS")) return true;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("HETCCL_TEST_FRESH_PROCESS", "1", 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execl("/proc/self/exe", "mp_tests", filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the test failed in its own process (status " << status << "; its output is above)";
  return false;
}
const std::vector<std::pair<std::string, std::string>> kTransportLog = {{"HETCCL_DEBUG", "INFO"},
                                                                        {"HETCCL_DEBUG_SUBSYS", "TRANSPORT"}};

// The rank's stderr goes to a file from before init on (the transport's log
// lines), read back by loggedText after the communicator is destroyed.
std::string logPath() { return "/tmp/hetccl-mp-ofi-log-" + std::to_string(getpid()); }
void logToFile(int) {
  fflush(stderr);
  if (!freopen(logPath().c_str(), "w", stderr)) abort();
}
std::string loggedText(Rank& r) {
  if (r.comm) {  // the transport logs what it did when it closes
    EXPECT_EQ(hetcclCommDestroy(r.comm), hetcclSuccess);
  }
  r.comm = nullptr;
  fflush(stderr);
  std::ifstream in(logPath());
  std::stringstream text;
  text << in.rdbuf();
  unlink(logPath().c_str());
  return text.str();
}

// The numbers of the ofi transport's closing line: messages written by RMA,
// received by RMA, registrations for remote writes; all -1 where it is missing.
struct RmaCounts {
  long long wrote = -1, received = -1, registrations = -1;
};
RmaCounts rmaCounts(const std::string& log) {
  RmaCounts c;
  const size_t at = log.find("wrote ");
  if (at != std::string::npos)
    sscanf(log.c_str() + at, "wrote %lld messages by RMA, received %lld by RMA (%lld registrations)", &c.wrote,
           &c.received, &c.registrations);
  return c;
}

// Messages of several 4 MiB parts (an odd count: the last part is short),
// sent, received and folded from the staging slots, over both providers.
TEST(Ofi, MessagesOfManyParts) {
  for (const std::string& t : ofiTransports()) {
    JobOptions opt;
    opt.transport = t;
    runJob("a,b", opt, [](Rank& r) {
      EXPECT_STREQ(infoOf(r).transport, "ofi");
      largeAllReduce(r, (size_t{5} << 20) + 3);  // 20 MiB + 12 bytes
      std::vector<float> s((size_t{3} << 20) + 1, 1.0f + r.rank), d(s.size(), 0.0f);
      HC_ASSERT_OK(hetcclGroupStart(), nullptr);
      HC_ASSERT_OK(hetcclSend(s.data(), s.size(), hetcclFloat32, 1 - r.rank, r.comm, nullptr), r.comm);
      HC_ASSERT_OK(hetcclRecv(d.data(), d.size(), hetcclFloat32, 1 - r.rank, r.comm, nullptr), r.comm);
      HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
      EXPECT_EQ(d.front(), 2.0f - r.rank);
      EXPECT_EQ(d.back(), 2.0f - r.rank);
    });
  }
}

// The registration path (what EFA's FI_MR_LOCAL asks for), forced on the
// providers here, which do not need it: every collective, messages of many
// parts and folds from the registered staging slots, plaintext and sealed.
// With RMA writes on ("_rma"), the writes' sources and the offers and
// finishes are registered too.
TEST(Ofi, RegisteredBuffers) {
  for (const char* transport : {"ofi_tcp_reg", "ofi_tcp_reg_rma"})
    for (const char* encrypt : {"off", "all"}) {
      SCOPED_TRACE(std::string(transport) + ", encryption " + encrypt);
      JobOptions opt;
      opt.transport = transport;
      opt.env = {{"HETCCL_ENCRYPT", encrypt}};
      runJob("a,b,a,b", opt, [](Rank& r) {
        everyCollective(r);
        largeAllReduce(r, (size_t{5} << 20) + 3);
      });
    }
}

// Every message of an encrypted link is sealed (header and parts), with a
// new key every few messages; every collective comes out right, and a
// message of several parts too.
TEST(Ofi, EncryptedLinksSealEveryMessage) {
  for (const std::string& t : ofiTransports()) {
    JobOptions opt;
    opt.transport = t;
    opt.env = {{"HETCCL_ENCRYPT", "all"}, {"HETCCL_ENCRYPT_REKEY_RECORDS", "32"}, {"HETCCL_HOST_THREADS", "2"}};
    runJob("a,b,a,b", opt, [](Rank& r) {
      hetcclCommInfo_t info = infoOf(r);
      EXPECT_EQ(info.encryptedPeers, r.nranks - 1);
      EXPECT_STREQ(info.transport, "ofi");
      everyCollective(r);
      largeAllReduce(r, (size_t{3} << 20) / 2);  // 6 MiB: two parts per message
    });
  }
}

// Cross-site: only the links between the sites are sealed.
TEST(Ofi, CrossSiteSealsOnlyTheLinksBetweenSites) {
  JobOptions opt;
  opt.transport = "ofi_tcp";
  opt.env = {{"HETCCL_SITE_MAP", "0-1:onprem,2-3:cloud"}, {"HETCCL_ENCRYPT", "cross-site"}};
  runJob("a,a,b,b", opt, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.encryptedPeers, 2);
    EXPECT_EQ(info.plainPeers, 1);
    largeAllReduce(r, size_t{1} << 20);
  });
}

// With HETCCL_OFI_RMA_MIN every message of that size and up on a plaintext
// link is written into the receiver's registered buffer: every collective
// comes out right (folds take tagged parts), messages of several parts too,
// and the transport's count says writes happened. A receive buffer used call
// after call is registered once (the cache), not once per call.
TEST(Ofi, RmaWritesLandInReceiveBuffers) {
  if (!inFreshProcess(kTransportLog)) return;
  for (const std::string& t : ofiTransports()) {
    SCOPED_TRACE(t);
    JobOptions opt;
    opt.transport = t;
    opt.env = {{"HETCCL_OFI_RMA_MIN", "64K"}};
    opt.beforeInit = logToFile;
    runJob("a,b,a,b", opt, [](Rank& r) {
      everyCollective(r);
      largeAllReduce(r, (size_t{5} << 20) + 3);  // 20 MiB: writes of several parts
      // The same buffers 20 times between rank pairs across the groups.
      const int peer = r.rank ^ 1;
      std::vector<float> s(size_t{1} << 16, 1.0f + r.rank), d(s.size(), 0.0f);
      for (int i = 0; i < 20; ++i) {
        HC_ASSERT_OK(hetcclGroupStart(), nullptr);
        HC_ASSERT_OK(hetcclSend(s.data(), s.size(), hetcclFloat32, peer, r.comm, nullptr), r.comm);
        HC_ASSERT_OK(hetcclRecv(d.data(), d.size(), hetcclFloat32, peer, r.comm, nullptr), r.comm);
        HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
        ASSERT_EQ(d.front(), 1.0f + peer);
        ASSERT_EQ(d.back(), 1.0f + peer);
      }
      const std::string log = loggedText(r);
      EXPECT_NE(log.find("RMA writes from 65536 bytes"), std::string::npos) << log;
      const RmaCounts c = rmaCounts(log);
      EXPECT_GE(c.wrote, 20) << log;
      EXPECT_GE(c.received, 20) << log;
      EXPECT_GE(c.registrations, 1) << log;
      EXPECT_LT(c.registrations, c.received - 15) << "the receive buffer of the 20 calls was registered again\n" << log;
    });
  }
}

// Encrypted links keep to sealed tagged parts with HETCCL_OFI_RMA_MIN set:
// nothing is written by RMA, and every collective comes out right.
TEST(Ofi, RmaNeverOnEncryptedLinks) {
  if (!inFreshProcess(kTransportLog)) return;
  JobOptions opt;
  opt.transport = "ofi_tcp";
  opt.env = {{"HETCCL_OFI_RMA_MIN", "1"}, {"HETCCL_ENCRYPT", "all"}};
  opt.beforeInit = logToFile;
  runJob("a,b,a,b", opt, [](Rank& r) {
    everyCollective(r);
    const std::string log = loggedText(r);
    const RmaCounts c = rmaCounts(log);
    EXPECT_EQ(c.wrote, 0) << log;
    EXPECT_EQ(c.received, 0) << log;
  });
}

// Where one rank's libfabric offers no FI_RMA (a library that refuses the
// capability, as HETCCL_OFI_LIB on rank 1), every rank keeps to tagged
// parts, says so in its log, and every collective comes out right.
TEST(Ofi, RmaOffWhereARankLacksIt) {
  if (!inFreshProcess(kTransportLog)) return;
  JobOptions opt;
  opt.transport = "ofi_tcp";
  opt.env = {{"HETCCL_OFI_RMA_MIN", "1"}};
  opt.beforeInit = [](int rank) {
    logToFile(rank);
    if (rank == 1) setenv("HETCCL_OFI_LIB", HETCCL_TEST_OFI_NO_RMA, 1);
  };
  runJob("a,b,a,b", opt, [](Rank& r) {
    everyCollective(r);
    const std::string log = loggedText(r);
    EXPECT_NE(log.find("RMA writes off (HETCCL_OFI_RMA_MIN=1): rank 1's provider offers no FI_RMA"), std::string::npos)
        << log;
    EXPECT_NE(log.find("RMA writes never"), std::string::npos) << log;
    EXPECT_EQ(rmaCounts(log).wrote, -1) << "no RMA path, no count\n" << log;
    if (r.rank == 1) {
      EXPECT_NE(log.find("and RMA writes (FI_RMA)"), std::string::npos) << log;
    }
  });
}

// A peer that did its part of a call and exited is no death: rank 1
// receives from ranks 0 and 2 in one group call; rank 0's send completes at
// once and rank 0 ends its job, while rank 2 sends a second later. Rank 1's
// wait for rank 2 outlasts rank 0's process, and the call still succeeds
// (it used to fail with "rank 0 died", as the full matrix's last SendRecv
// call did once on a loaded machine). Over RMA writes and tagged parts.
TEST(Ofi, APeerThatExitedAfterItsPartIsNoDeath) {
  for (const std::string& t : ofiTransports())
    for (const std::string& path : {std::string("_rma"), std::string()}) {
      SCOPED_TRACE(t + path);
      JobOptions opt;
      opt.transport = t + path;
      runJob("a,b,c", opt, receiveFromTwoWhileOneExits);
    }
}

// Init fails on every rank with an error that names what is wrong and how to
// mend it: a provider libfabric does not have, a library that is not there,
// ranks on different providers.
TEST(Ofi, BadSetupIsNamedAtInit) {
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::string>> env;
    std::pair<std::string, std::string> rank1Env;  // set on rank 1 only
    hetcclResult_t code;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"unknown provider",
       {{"HETCCL_OFI_PROVIDER", "nosuchfabric"}},
       {},
       hetcclSystemError,
       {"nosuchfabric", "HETCCL_OFI_PROVIDER", "fi_info"}},
      {"missing library",
       {{"HETCCL_OFI_LIB", "/nonexistent/libfabric.so.1"}},
       {},
       hetcclSystemError,
       {"/nonexistent/libfabric.so.1", "HETCCL_OFI_LIB"}},
      {"providers differ", {}, {"FI_PROVIDER", "shm"}, hetcclInvalidUsage, {"shm", "tcp;ofi_rxm", "FI_PROVIDER"}},
      {"RMA sizes differ",
       {{"HETCCL_OFI_RMA_MIN", "1M"}},
       {"HETCCL_OFI_RMA_MIN", "2M"},
       hetcclInvalidUsage,
       {"HETCCL_OFI_RMA_MIN", "1048576", "2097152", "every rank"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    JobOptions opt;
    opt.transport = "ofi_tcp";
    opt.env = c.env;
    opt.initMayFail = true;
    opt.env.emplace_back("HETCCL_TIMEOUT_S", "10");
    if (!c.rank1Env.first.empty())
      opt.beforeInit = [&c](int rank) {
        if (rank == 1) setenv(c.rank1Env.first.c_str(), c.rank1Env.second.c_str(), 1);
      };
    runJob("a,b", opt, [&c](Rank& r) {
      EXPECT_EQ(r.initResult, c.code) << r.initError;
      for (const std::string& w : c.words) EXPECT_NE(r.initError.find(w), std::string::npos) << r.initError;
    });
  }
}

#else

TEST(Ofi, NotBuilt) { GTEST_SKIP() << "built without libfabric's headers (libfabric-dev): no ofi transport"; }

#endif

}  // namespace
}  // namespace hmp
