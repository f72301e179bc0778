// Encrypted links between sites (HETCCL_ENCRYPT, HETCCL_SITE): every
// collective over tcp with only the cross-site links encrypted, or all of
// them with a new key every few records; the modes must agree; encryption
// refuses a guessable secret and names a missing libcrypto; the secret file
// must be the owner's alone.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace hmp {
namespace {

// Every collective, out of place and in place, at a size that spans several
// records and one that fits in one, float32 sum (types are the matrix's job).
void everyCollective(const Rank& r) {
  Checker ck(r);
  uint64_t seed = 7;
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

hetcclCommInfo_t infoOf(const Rank& r) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  EXPECT_EQ(hetcclCommGetInfo(r.comm, &info), hetcclSuccess) << hetcclGetLastError(r.comm);
  return info;
}

TEST(Encrypt, CrossSiteLinksOnlyAndEveryCollectiveRight) {
  JobOptions opt;
  opt.transport = "tcp";
  opt.env = {{"HETCCL_SITE_MAP", "0-1:onprem,2-3:cloud"}, {"HETCCL_ENCRYPT", "cross-site"}};
  runJob("a,a,b,b", opt, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_STREQ(info.site, r.rank < 2 ? "onprem" : "cloud");
    EXPECT_STREQ(info.encrypt, "cross-site");
    EXPECT_EQ(info.encryptedPeers, 2);  // the other site's two ranks
    EXPECT_EQ(info.plainPeers, 1);      // its own site's other rank
    everyCollective(r);
    // A split keeps each rank's site (the map names the job's four ranks,
    // not the two of each new communicator): one link, across sites.
    hetcclComm_t half = nullptr;
    ASSERT_EQ(hetcclCommSplit(r.comm, r.rank % 2, r.rank, &half, nullptr), hetcclSuccess) << hetcclGetLastError(r.comm);
    hetcclCommInfo_t hi{};
    hi.size = sizeof(hi);
    ASSERT_EQ(hetcclCommGetInfo(half, &hi), hetcclSuccess) << hetcclGetLastError(half);
    EXPECT_STREQ(hi.site, info.site);
    EXPECT_EQ(hi.encryptedPeers, 1);
    std::vector<float> x(100000, 1.0f + r.rank);
    EXPECT_EQ(hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, half, nullptr), hetcclSuccess);
    EXPECT_EQ(x[99999], r.rank % 2 ? 6.0f : 4.0f);  // ranks 1+3 or 0+2, each plus one
    EXPECT_EQ(hetcclCommDestroy(half), hetcclSuccess);
  });
}

TEST(Encrypt, AllLinksWithFrequentRekeysAcrossMixedGroups) {
  JobOptions opt;
  opt.transport = "tcp";
  // Three threads seal and open each link's records (batches of three
  // records, keys changing inside a batch), though the ranks share 2 cores.
  opt.env = {{"HETCCL_ENCRYPT", "all"}, {"HETCCL_ENCRYPT_REKEY_RECORDS", "2"}, {"HETCCL_HOST_THREADS", "3"}};
  runJob("a,b,a,b,c", opt, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.encryptedPeers, r.nranks - 1);
    EXPECT_EQ(info.plainPeers, 0);
    everyCollective(r);
  });
}

#if HETCCL_HAVE_UCX
// The ucx transport seals every message of an encrypted link: every
// collective, and messages of several parts (6 MiB: two parts, each sealed
// and opened on 2 threads) folded or copied from the receive slots, with a
// new key every 2 messages; the RMA path (from 64 KiB here) stays off on
// sealed links. Over UCX's shared memory and its tcp.
TEST(Encrypt, UcxSealsEveryMessageOfAnEncryptedLink) {
  for (const char* tls : {"ucx_sm_rma", "ucx_tcp"}) {
    JobOptions opt;
    opt.transport = tls;
    opt.env = {{"HETCCL_ENCRYPT", "all"},
               {"HETCCL_ENCRYPT_REKEY_RECORDS", "32"},
               {"HETCCL_HOST_THREADS", "2"},
               {"HETCCL_UCX_RMA_MIN", "64K"}};
    runJob("a,b,a,b", opt, [](Rank& r) {
      hetcclCommInfo_t info = infoOf(r);
      EXPECT_EQ(info.encryptedPeers, r.nranks - 1);
      EXPECT_STREQ(info.transport, "ucx");
      everyCollective(r);
      std::vector<float> x(1536 * 1024, 1.0f + r.rank);  // 6 MiB
      ASSERT_EQ(hetcclAllReduce(x.data(), x.data(), x.size(), hetcclFloat32, hetcclSum, r.comm, nullptr), hetcclSuccess)
          << hetcclGetLastError(r.comm);
      EXPECT_EQ(x.front(), 10.0f);
      EXPECT_EQ(x.back(), 10.0f);
      std::vector<float> all(x.size() * 4);
      ASSERT_EQ(hetcclAllGather(x.data(), all.data(), x.size(), hetcclFloat32, r.comm, nullptr), hetcclSuccess);
      EXPECT_EQ(all[x.size() * 3 + 12345], 10.0f);
    });
  }
}

// Ranks that disagree on a large call over a sealed ucx link (RMA from 1
// MiB, which sealed links skip): the receiver drops the sender's parts
// (rather than refuse an offer the sender never waits for), waiting at most
// a second for a part that the sender, failing too, never seals; both fail
// within 4 s (before: 5 s and more), naming each other.
TEST(Encrypt, UcxMismatchOnASealedLinkFailsAtOnce) {
  JobOptions opt;
  opt.transport = "ucx_sm_rma";
  opt.env = {{"HETCCL_ENCRYPT", "all"}};
  runJob("a,b", opt, [](Rank& r) {
    std::vector<float> buf(1 << 20, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const hetcclResult_t res = hetcclAllReduce(buf.data(), buf.data(), r.rank ? buf.size() : buf.size() / 2,
                                               hetcclFloat32, hetcclSum, r.comm, nullptr);
    const std::string text = hetcclGetLastError(r.comm);
    EXPECT_TRUE(res == hetcclInvalidUsage || res == hetcclRemoteError) << res << ": " << text;
    EXPECT_NE(text.find("rank " + std::to_string(1 - r.rank)), std::string::npos) << text;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 4) << text;
  });
}

// Cross-site over ucx: only the links between the sites are sealed.
TEST(Encrypt, UcxCrossSiteSealsOnlyTheLinksBetweenSites) {
  JobOptions opt;
  opt.transport = "ucx_sm";
  opt.env = {{"HETCCL_SITE_MAP", "0-1:onprem,2-3:cloud"}, {"HETCCL_ENCRYPT", "cross-site"}};
  runJob("a,a,b,b", opt, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.encryptedPeers, 2);
    EXPECT_EQ(info.plainPeers, 1);
    everyCollective(r);
  });
}
#endif

TEST(Encrypt, NoSitesMeansNothingEncryptedAndShmIsNever) {
  JobOptions opt;
  opt.transport = "shm";
  opt.env = {{"HETCCL_ENCRYPT", "all"}};
  runJob("a,a,b", opt, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.encryptedPeers, 0);  // same-host shm: memory of one host
    EXPECT_EQ(info.plainPeers, 2);
  });
  JobOptions tcp;
  tcp.transport = "tcp";
  runJob("a,b", tcp, [](Rank& r) {
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_STREQ(info.encrypt, "cross-site");  // the default
    EXPECT_STREQ(info.site, "");
    EXPECT_EQ(info.encryptedPeers, 0);
  });
}

TEST(Encrypt, ModesMustAgree) {
  JobOptions opt;
  opt.transport = "tcp";
  opt.initMayFail = true;
  opt.beforeInit = [](int rank) { setenv("HETCCL_ENCRYPT", rank == 0 ? "off" : "all", 1); };
  runJob("a,b,b", opt, [](Rank& r) {
    EXPECT_EQ(r.initResult, hetcclInvalidUsage);
    EXPECT_NE(r.initError.find("HETCCL_ENCRYPT is"), std::string::npos) << r.initError;
  });
}

TEST(Encrypt, MissingCryptoLibraryIsNamed) {
  // libcrypto is loaded once per process: where this process (whose forks
  // are the ranks) loaded it already, serving an earlier test's rendezvous,
  // the ranks never read HETCCL_CRYPTO_LIB. ctest runs each test alone.
  if (void* h = dlopen("libcrypto.so.3", RTLD_LAZY | RTLD_NOLOAD)) {
    dlclose(h);
    GTEST_SKIP() << "libcrypto already loaded in this process (run this test on its own, as ctest does)";
  }
  JobOptions opt;
  opt.transport = "tcp";
  opt.initMayFail = true;
  opt.env = {{"HETCCL_ENCRYPT", "all"}, {"HETCCL_CRYPTO_LIB", "/nonexistent/libcrypto.so.3"}};
  runJob("a,b", opt, [](Rank& r) {
    EXPECT_NE(r.initResult, hetcclSuccess);
    EXPECT_NE(r.initError.find("HETCCL_CRYPTO_LIB"), std::string::npos) << r.initError;
  });
}

// hetcclCommInitFromEnv as torchrun starts it, with encryption on.
void launch(Rank& r, int port, hetcclResult_t expect, const std::string& says) {
  setenv("RANK", std::to_string(r.rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(r.nranks).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("HETCCL_GROUP", r.rank == 0 ? "a" : "b", 1);
  setenv("HETCCL_TRANSPORT", "tcp", 1);
  setenv("HETCCL_ENCRYPT", "all", 1);
  hetcclResult_t got = hetcclCommInitFromEnv(&r.comm, nullptr);
  std::string err = hetcclGetLastError(nullptr);
  EXPECT_EQ(got, expect) << err;
  if (!says.empty()) {
    EXPECT_NE(err.find(says), std::string::npos) << err;
  }
  if (got != hetcclSuccess) r.comm = nullptr;
}

TEST(Encrypt, LauncherSecretIsRefusedAndASecretFileMustBePrivate) {
  JobOptions opt;
  opt.initComm = false;
  const int port = freePortPair();
  runJob("a,b", opt, [&](Rank& r) {
    unsetenv("HETCCL_JOB_SECRET");
    unsetenv("HETCCL_JOB_SECRET_FILE");
    launch(r, port, hetcclInvalidUsage, "HETCCL_JOB_SECRET");
  });
  char path[] = "/tmp/hetccl-secret-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const char line[] = "0123456789abcdef0123456789abcdef\n";
  ASSERT_EQ(write(fd, line, sizeof(line) - 1), static_cast<ssize_t>(sizeof(line) - 1));
  close(fd);
  chmod(path, 0644);
  const int port2 = freePortPair();
  runJob("a,b", opt, [&](Rank& r) {
    setenv("HETCCL_JOB_SECRET_FILE", path, 1);
    launch(r, port2, hetcclInvalidUsage, "chmod 600");
  });
  chmod(path, 0600);
  const int port3 = freePortPair();
  runJob("a,b", opt, [&](Rank& r) {
    setenv("HETCCL_JOB_SECRET_FILE", path, 1);
    launch(r, port3, hetcclSuccess, "");
    if (!r.comm) return;
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.encryptedPeers, 1);
    float x = 1.0f + r.rank;
    EXPECT_EQ(hetcclAllReduce(&x, &x, 1, hetcclFloat32, hetcclSum, r.comm, nullptr), hetcclSuccess);
    EXPECT_EQ(x, 3.0f);
  });
  unlink(path);
}

}  // namespace
}  // namespace hmp
