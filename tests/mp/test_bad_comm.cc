// Bad communicator input: init arguments, unique ids that are garbage or
// belong to another job, destroyed and null handles. Each returns the right
// code, names what is wrong in hetcclGetLastError, and never hangs.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>

#include "harness.h"

namespace hmp {
namespace {

constexpr hetcclResult_t kArg = hetcclInvalidArgument;

// The unique id layout (src/bootstrap/unique_id.cc): magic 0..3, version
// 4..5, address family 6..7, port 8..9, address 12..27, job id 32..39,
// secret 40..71.
constexpr size_t kVersionAt = 4, kFamilyAt = 6, kPortAt = 8, kJobIdAt = 32, kSecretAt = 40, kSecretBytes = 32;

hetcclUniqueId freshId() {
  hetcclUniqueId id{};
  hetcclResult_t r = hetcclGetUniqueId(&id);
  if (r != hetcclSuccess) {
    ADD_FAILURE() << callFailure("hetcclGetUniqueId", r, nullptr);
    throw AbortRank{};
  }
  return id;
}

// A local TCP port with nothing listening on it.
uint16_t deadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

JobOptions oneProcess() {
  JobOptions opt;
  opt.initComm = false;  // the bodies make (or fail to make) their own
  return opt;
}

TEST(BadComm, InitArguments) {
  runJob("a", oneProcess(), [](Rank&) {
    hetcclUniqueId id = freshId();
    hetcclComm_t c = reinterpret_cast<hetcclComm_t>(0x1);  // must come back NULL on failure
    EXPECT_HC_ERROR(hetcclCommInitRank(nullptr, 1, id, 0), kArg, nullptr, "comm");
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 0, id, 0), kArg, nullptr, "nranks");
    EXPECT_EQ(c, nullptr) << "a failed init must set *comm to NULL";
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, -3, id, 0), kArg, nullptr, "nranks");
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 2, id, 2), kArg, nullptr, "rank");
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 2, id, -1), kArg, nullptr, "rank");
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.magic = 0;
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, freshId(), 0, &cfg), kArg, nullptr, "config");
    cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.size = 1;
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, freshId(), 0, &cfg), kArg, nullptr, "size");
    cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.timeoutSeconds = -1;
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, freshId(), 0, &cfg), kArg, nullptr, "timeoutSeconds");
    cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.groupName = "a-group-name-much-longer-than-31-characters";
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, freshId(), 0, &cfg), kArg, nullptr, "group name");
    // A rank whose config or settings are bad tells the id's rendezvous root
    // (so that its peers fail at once): each such try takes a fresh id.
    cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.transport = "carrier-pigeon";
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, freshId(), 0, &cfg), kArg, nullptr, "transport");
    EXPECT_EQ(c, nullptr);
    // Checked on every rank, host ranks too (GPU ranks use it).
    setenv("HETCCL_GPU_BORDER", "yes", 1);
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, freshId(), 0), kArg, nullptr, "HETCCL_GPU_BORDER");
    unsetenv("HETCCL_GPU_BORDER");
    EXPECT_EQ(c, nullptr);
  });
}

// Ranks that would cut a large AllReduce into different chunks, or take
// different plans, would send messages of different sizes: every rank
// refuses at init, naming the setting (one rank sets it, or sets another value).
void settingMustAgree(const char* name, const char* value, const char* other) {
  JobOptions opt;
  opt.initMayFail = true;
  opt.beforeInit = [=](int rank) {
    if (rank == 1) setenv(name, value, 1);
    if (rank == 2 && other) setenv(name, other, 1);
  };
  runJob("a,a,b", opt, [=](Rank& r) {
    EXPECT_EQ(r.initResult, hetcclInvalidUsage) << r.initError;
    EXPECT_NE(r.initError.find(name), std::string::npos) << r.initError;
    EXPECT_EQ(r.comm, nullptr);
  });
}

TEST(BadComm, ChunkBytesMustAgreeOnEveryRank) { settingMustAgree("HETCCL_CHUNK_BYTES", "1M", nullptr); }
TEST(BadComm, SmallBytesMustAgreeOnEveryRank) {
  settingMustAgree("HETCCL_SMALL_BYTES", "64K", nullptr);  // the default's value, but unset elsewhere
  settingMustAgree("HETCCL_SMALL_BYTES", "64K", "1M");
}

// A rank that cannot initialise (here: a bad group map, a bad setting) tells
// the rendezvous root, which refuses every rank with its message: all fail
// at once, naming the cause, instead of waiting HETCCL_TIMEOUT_S (30 s here;
// the job is killed after 20 s).
void expectEveryRankFailsFast(const std::vector<std::pair<std::string, std::string>>& env,
                              const std::function<void(int)>& beforeInit, const std::string& word) {
  JobOptions opt;
  opt.initMayFail = true;
  opt.deadlineS = 20;
  opt.env = env;
  opt.beforeInit = beforeInit;
  runJob("-,-,-,-", opt, [&](Rank& r) {
    EXPECT_TRUE(r.initResult == hetcclInvalidArgument || r.initResult == hetcclInvalidUsage)
        << r.initResult << ": " << r.initError;
    EXPECT_NE(r.initError.find(word), std::string::npos) << r.initError;
    EXPECT_EQ(r.comm, nullptr);
  });
}

TEST(BadComm, GroupMapThatLeavesRanksOutFailsEveryRankAtOnce) {
  expectEveryRankFailsFast({{"HETCCL_GROUP_MAP", "0:a"}}, nullptr, "HETCCL_GROUP_MAP '0:a' does not name ranks 1,2,3");
}

TEST(BadComm, OverlappingGroupMapFailsEveryRank) {
  expectEveryRankFailsFast({{"HETCCL_GROUP_MAP", "0-1:a,1-3:b"}}, nullptr, "both name rank 1");
}

TEST(BadComm, GroupMapsThatDifferFailEveryRank) {
  expectEveryRankFailsFast(
      {{"HETCCL_GROUP_MAP", "0-1:a,2-3:b"}},
      [](int rank) {
        if (rank == 2) setenv("HETCCL_GROUP_MAP", "0-2:a,3:b", 1);
      },
      "HETCCL_GROUP_MAP differs between ranks");
}

// One rank's out-of-range setting: it fails naming the setting, the others
// hear it from the root ("rank 2 could not initialise: HETCCL_TIMEOUT_S...").
TEST(BadComm, OneRanksBadSettingFailsEveryRankAtOnce) {
  expectEveryRankFailsFast(
      {{"HETCCL_GROUP_MAP", "0-1:a,2-3:b"}},
      [](int rank) {
        if (rank == 2) setenv("HETCCL_TIMEOUT_S", "10000000000", 1);
      },
      "HETCCL_TIMEOUT_S is '10000000000'");
}

TEST(BadComm, UniqueIdGarbage) {
  runJob("a", oneProcess(), [](Rank&) {
    hetcclComm_t c = nullptr;
    hetcclUniqueId garbage;
    memset(garbage.internal, 0x5a, sizeof(garbage.internal));
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, garbage, 0), kArg, nullptr, "unique id");
    hetcclUniqueId zero{};
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, zero, 0), kArg, nullptr, "unique id");
    hetcclUniqueId id = freshId();
    hetcclUniqueId v = id;
    v.internal[kVersionAt] = 99;
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, v, 0), kArg, nullptr, "version");
    hetcclUniqueId f = id;
    f.internal[kFamilyAt] = 99;
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, f, 0), kArg, nullptr, "family");
    EXPECT_EQ(c, nullptr);
  });
}

// An id with the bytes of a real one but another job's secret (or job id):
// the root refuses it at once (RemoteError), and is not disturbed by it: the
// real rank still joins afterwards.
TEST(BadComm, UniqueIdOfAnotherJob) {
  runJob("a", oneProcess(), [](Rank&) {
    hetcclUniqueId id = freshId();
    hetcclComm_t c = nullptr;
    hetcclUniqueId wrongSecret = id;
    for (size_t i = 0; i < kSecretBytes; ++i) wrongSecret.internal[kSecretAt + i] ^= 0x5c;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, wrongSecret, 0), hetcclRemoteError, nullptr, "secret");
    EXPECT_LT(secondsSince(t0), 10) << "a refused id must fail at once, not at the timeout";
    hetcclUniqueId wrongJob = id;
    wrongJob.internal[kJobIdAt] ^= 0x01;
    t0 = std::chrono::steady_clock::now();
    EXPECT_HC_ERROR(hetcclCommInitRank(&c, 1, wrongJob, 0), hetcclRemoteError, nullptr, "rendezvous");
    EXPECT_LT(secondsSince(t0), 10);
    EXPECT_EQ(c, nullptr);
    HC_ASSERT_OK(hetcclCommInitRank(&c, 1, id, 0), nullptr);
    HC_EXPECT_OK(hetcclCommDestroy(c), c);
  });
}

// An id whose root is gone (a job that ended): a remote error naming the
// rendezvous after the configured timeout, not a hang.
TEST(BadComm, UniqueIdOfFinishedJob) {
  runJob("a", oneProcess(), [](Rank&) {
    hetcclUniqueId id = freshId();
    uint16_t port = htons(deadPort());
    memcpy(id.internal + kPortAt, &port, 2);
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.timeoutSeconds = 2;
    hetcclComm_t c = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_HC_ERROR(hetcclCommInitRankConfig(&c, 1, id, 0, &cfg), hetcclRemoteError, nullptr, "rendezvous");
    EXPECT_LT(secondsSince(t0), 10);
    EXPECT_EQ(c, nullptr);
  });
}

// Handles that were destroyed (the library keeps a registry of live
// communicators, so a stale handle is an error, not a use-after-free), and
// NULL handles.
TEST(BadComm, DestroyedAndNullHandles) {
  runJob("a", oneProcess(), [](Rank&) {
    hetcclComm_t c = nullptr;
    HC_ASSERT_OK(hetcclCommInitRank(&c, 1, freshId(), 0), nullptr);
    HC_ASSERT_OK(hetcclCommDestroy(c), c);
    // No communicator is created after this point: c's address stays dead.
    float s[4] = {1, 2, 3, 4}, d[4];
    int n = 0;
    hetcclCommInfo_t info{};
    info.size = sizeof(info);
    hetcclResult_t async;
    hetcclRedOp_t op;
    hetcclComm_t split;
    const hetcclResult_t kUse = hetcclInvalidUsage;
    EXPECT_HC_ERROR(hetcclAllReduce(s, d, 4, hetcclFloat32, hetcclSum, c, nullptr), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclBroadcast(s, d, 4, hetcclFloat32, 0, c, nullptr), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclSend(s, 4, hetcclFloat32, 0, c, nullptr), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommCount(c, &n), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommUserRank(c, &n), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommGetInfo(c, &info), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommGetAsyncError(c, &async), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommFinalize(c), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommSplit(c, 0, 0, &split, nullptr), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclRedOpCreatePreMulSum(&op, s, hetcclFloat32, hetcclScalarHostImmediate, c), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommDestroy(c), kUse, c, "comm");
    EXPECT_HC_ERROR(hetcclCommAbort(c), kUse, c, "comm");

    EXPECT_HC_ERROR(hetcclAllReduce(s, d, 4, hetcclFloat32, hetcclSum, nullptr, nullptr), kArg, nullptr, "comm");
    EXPECT_HC_ERROR(hetcclCommCount(nullptr, &n), kArg, nullptr, "comm");
    EXPECT_HC_ERROR(hetcclCommGetInfo(nullptr, &info), kArg, nullptr, "comm");
    HC_EXPECT_OK(hetcclCommDestroy(nullptr), nullptr);  // as in NCCL: a no-op
    HC_EXPECT_OK(hetcclCommAbort(nullptr), nullptr);
  });
}

}  // namespace
}  // namespace hmp
