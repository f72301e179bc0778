// The ofi transport (libfabric) beyond the matrix and the failures suite:
// messages of many parts, encrypted links, and what goes wrong at init (an
// unknown provider, a missing library, ranks on different providers). Over
// Debian's libfabric 1.17 tcp provider on the loopback and its shm provider:
// EFA and Slingshot's cxi cannot be had on the machines these tests run on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"
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
TEST(Ofi, RegisteredBuffers) {
  for (const char* encrypt : {"off", "all"}) {
    JobOptions opt;
    opt.transport = "ofi_tcp_reg";
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

// Init fails on every rank with an error that names what is wrong and how to
// mend it: a provider libfabric does not have, a library that is not there,
// ranks on different providers.
TEST(Ofi, BadSetupIsNamedAtInit) {
  struct Case {
    const char* what;
    std::vector<std::pair<std::string, std::string>> env;
    bool rank1OnShm;
    hetcclResult_t code;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"unknown provider",
       {{"HETCCL_OFI_PROVIDER", "nosuchfabric"}},
       false,
       hetcclSystemError,
       {"nosuchfabric", "HETCCL_OFI_PROVIDER", "fi_info"}},
      {"missing library",
       {{"HETCCL_OFI_LIB", "/nonexistent/libfabric.so.1"}},
       false,
       hetcclSystemError,
       {"/nonexistent/libfabric.so.1", "HETCCL_OFI_LIB"}},
      {"providers differ", {}, true, hetcclInvalidUsage, {"shm", "tcp;ofi_rxm", "FI_PROVIDER"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    JobOptions opt;
    opt.transport = "ofi_tcp";
    opt.env = c.env;
    opt.initMayFail = true;
    opt.env.emplace_back("HETCCL_TIMEOUT_S", "10");
    if (c.rank1OnShm)
      opt.beforeInit = [](int rank) {
        if (rank == 1) setenv("FI_PROVIDER", "shm", 1);
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
