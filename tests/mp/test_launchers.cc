// hetcclCommInitFromEnv under a torchrun-style environment: each forked rank
// gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, and its
// group from HETCCL_GROUP (its own) or HETCCL_GROUP_MAP (one map for all).
// The Open MPI case is a separate executable run by mpirun (mpirun_rank.cc).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "checks.h"
#include "layouts.h"

namespace hmp {
namespace {

void setEnv(const char* k, const std::string& v) { setenv(k, v.c_str(), 1); }

// After init: the layout is the one the environment described, and
// collectives work.
void checkComm(Rank& r) {
  expectInfoMatchesLayout(r);
  Checker ck(r);
  uint64_t seed = 300;
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast, Coll::kReduceScatter, Coll::kAlltoAll}) {
    Check c;
    c.coll = coll;
    c.dt = coll == Coll::kAllReduce ? hetcclFloat32 : hetcclInt32;
    c.count = 1000;
    c.root = r.nranks - 1;
    c.seed = ++seed;
    ck.run(c);
  }
}

struct LaunchParam {
  std::string layout;
  std::string transport;
  bool groupMap;  // HETCCL_GROUP_MAP for all, else HETCCL_GROUP per rank
};

void PrintTo(const LaunchParam& p, std::ostream* os) {
  *os << p.layout << " " << p.transport << (p.groupMap ? " HETCCL_GROUP_MAP" : " HETCCL_GROUP");
}

// "a,a,b,b" -> "0-1:a,2-3:b" (ranks of a group must be contiguous here).
std::string groupMap(const std::vector<std::string>& layout) {
  std::string map;
  for (size_t lo = 0; lo < layout.size();) {
    size_t hi = lo;
    while (hi + 1 < layout.size() && layout[hi + 1] == layout[lo]) ++hi;
    map += (map.empty() ? "" : ",") + std::to_string(lo) + "-" + std::to_string(hi) + ":" + layout[lo];
    lo = hi + 1;
  }
  return map;
}

class Torchrun : public ::testing::TestWithParam<LaunchParam> {};

TEST_P(Torchrun, InitFromEnv) {
  const LaunchParam p = GetParam();
  const uint16_t port = freePortPair();
  ASSERT_NE(port, 0) << "no two adjacent free ports";
  JobOptions opt;
  opt.initComm = false;
  opt.transport = p.transport;
  runJob(p.layout, opt, [&](Rank& r) {
    setEnv("RANK", std::to_string(r.rank));
    setEnv("WORLD_SIZE", std::to_string(r.nranks));
    setEnv("LOCAL_RANK", std::to_string(r.rank));
    setEnv("LOCAL_WORLD_SIZE", std::to_string(r.nranks));
    setEnv("MASTER_ADDR", "127.0.0.1");
    setEnv("MASTER_PORT", std::to_string(port));
    if (p.groupMap)
      setEnv("HETCCL_GROUP_MAP", groupMap(r.layout));
    else
      setEnv("HETCCL_GROUP", r.group);
    setEnv("HETCCL_TRANSPORT", r.transport);
    r.progress("hetcclCommInitFromEnv");
    HC_ASSERT_OK(hetcclCommInitFromEnv(&r.comm, nullptr), nullptr);
    checkComm(r);
  });
}

// The address of whatever listens on TCP `port` of this host (from
// /proc/net/tcp), "" if nothing does.
std::string listenerAddress(uint16_t port) {
  FILE* f = fopen("/proc/net/tcp", "r");
  if (!f) return "";
  char line[512];
  std::string found;
  while (fgets(line, sizeof(line), f)) {
    unsigned addr = 0, p = 0, state = 0;
    if (sscanf(line, " %*d: %8X:%4X %*8X:%*4X %2X", &addr, &p, &state) == 3 && p == port && state == 0x0A) {
      in_addr a{};
      a.s_addr = addr;
      found = inet_ntoa(a);
    }
  }
  fclose(f);
  return found;
}

// With MASTER_ADDR=127.0.0.1 the rendezvous root listens on loopback only,
// not on every address (the job secret may be derived from launcher
// variables anyone on the network could guess).
TEST(Launchers, LoopbackMasterAddrKeepsTheRootOnLoopback) {
  const uint16_t port = freePortPair();
  ASSERT_NE(port, 0) << "no two adjacent free ports";
  JobOptions opt;
  opt.initComm = false;
  runJob("a", opt, [&](Rank& r) {
    setEnv("RANK", "0");
    setEnv("WORLD_SIZE", "2");  // rank 1 never comes: the root keeps listening
    setEnv("MASTER_ADDR", "127.0.0.1");
    setEnv("MASTER_PORT", std::to_string(port));
    hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    EXPECT_EQ(hetcclCommInitFromEnv(&r.comm, &cfg), hetcclInProgress) << hetcclGetLastError(nullptr);
    EXPECT_EQ(listenerAddress(static_cast<uint16_t>(port + 1)), "127.0.0.1");
    if (r.comm) {
      EXPECT_EQ(hetcclCommAbort(r.comm), hetcclSuccess);
    }
    r.comm = nullptr;
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Torchrun,
                         ::testing::Values(LaunchParam{"a,a,b,b", "shm", false}, LaunchParam{"a,b,a,b", "tcp", false},
                                           LaunchParam{"a,a,b,b", "tcp", true},
                                           LaunchParam{"a,a,a,b,b,c,c,c", "shm", true}),
                         [](const ::testing::TestParamInfo<LaunchParam>& i) {
                           return layoutTag(i.param.layout) + "_" + i.param.transport +
                                  (i.param.groupMap ? "_groupmap" : "_group");
                         });

}  // namespace
}  // namespace hmp
