// The net transport over the tests' own NCCL net plugin (netplugin_sockets.c,
// HETCCL_NET_PLUGIN set for every mp test by CMake): every collective on each
// ABI version the plugin exports (the version picked checked through what the
// plugin records), with flushed receives, a plugin that turns requests away,
// encrypted links (and one that alters a byte in flight); every plugin call
// failing in turn (the error names it); a plugin of unknown versions, a
// missing one and a bad version cap refused with errors that say what was
// wrong. A peer killed with SIGKILL:
// fault.PeerDeath (tests/fault); bad input, a peer that exits or goes
// silent, mismatched calls: mp.*/NetPlugin.* of the transport suites.
//
// No real plugin (aws-ofi-nccl on EFA or Slingshot, Google's TCPX/gIB,
// HPC-X's UCX plugin) runs here: none of those fabrics can be had on these
// machines. Across emulated hosts: tests/multihost/check_net_plugin.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checks.h"
#include "harness.h"

namespace hmp {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string scratchFile(const std::string& name) {
  std::string path = ::testing::TempDir() + "hetccl_net_" + name + "_" + std::to_string(getpid());
  unlink(path.c_str());
  return path;
}

struct Variant {
  std::string name;
  int abi;
  std::vector<std::pair<std::string, std::string>> env;
};

class NetPluginCollectives : public ::testing::TestWithParam<Variant> {};

// Every collective, sizes of one element to several parts (a part is 1 MiB
// under the default HETCCL_BUFFSIZE): float32 sum and int8 max, or every
// type and op with HETCCL_TEST_FULL=1 (make test-full).
TEST_P(NetPluginCollectives, EveryCollective) {
  const Variant& v = GetParam();
  const std::string record = scratchFile(v.name);
  JobOptions opt;
  opt.transport = "net";
  opt.env = v.env;
  opt.env.push_back({"HETCCL_NET_PLUGIN_ABI", std::to_string(v.abi)});
  opt.env.push_back({"NETPLUGIN_TEST_RECORD", record});
  const char* full = getenv("HETCCL_TEST_FULL");
  const bool everyType = full && *full && std::string(full) != "0";
  runJob("a,a,b", opt, [everyType](Rank& r) {
    Checker ck(r);
    uint64_t seed = 1;
    std::vector<std::pair<hetcclDataType_t, Op>> kinds = {{hetcclFloat32, Op::kSum}, {hetcclInt8, Op::kMax}};
    if (everyType) {
      kinds.clear();
      for (hetcclDataType_t dt : ref::allTypes())
        for (Op op : ref::allOps()) kinds.push_back({dt, op});
    }
    for (Coll coll : ref::allColls())
      for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}})
        for (const auto& [dt, op] : kinds) {
          if (everyType && !reduces(coll) && op != ref::allOps().front()) continue;  // one op is enough
          Check c;
          c.coll = coll;
          c.dt = dt;
          c.op = op;
          c.count = count;
          c.inPlace = count == 1000;
          c.root = static_cast<int>(seed % r.nranks);
          c.seed = ++seed;
          r.progress(c.label());
          ck.run(c);
        }
  });
  const std::string got = readFile(record);
  unlink(record.c_str());
  const std::string want = "init v" + std::to_string(v.abi);
  EXPECT_NE(got.find(want), std::string::npos) << "the plugin's record: " << got;
  for (int other : {8, 9, 10, 11, 12}) {
    if (other != v.abi) {
      EXPECT_EQ(got.find("init v" + std::to_string(other)), std::string::npos) << "the plugin's record: " << got;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Abi, NetPluginCollectives,
    // v8 has no forceFlush: an iflush there would fail its first call.
    ::testing::Values(Variant{"v8_no_flush", 8, {{"NETPLUGIN_TEST_FAIL", "iflush:1"}}},
                      Variant{"v9_flush", 9, {{"NETPLUGIN_TEST_FLUSH", "1"}}},
                      Variant{"v10_busy", 10, {{"NETPLUGIN_TEST_BUSY", "1"}}},
                      Variant{"v11_flush_busy", 11, {{"NETPLUGIN_TEST_FLUSH", "1"}, {"NETPLUGIN_TEST_BUSY", "1"}}},
                      // v12's properties place maxP2pBytes further on: a loader
                      // reading v11's layout would send parts the plugin refuses.
                      Variant{
                          "v12_flush_maxp2p", 12, {{"NETPLUGIN_TEST_FLUSH", "1"}, {"NETPLUGIN_TEST_MAXP2P", "131072"}}},
                      Variant{"v10_encrypted", 10, {{"HETCCL_ENCRYPT", "all"}, {"HETCCL_ENCRYPT_REKEY_RECORDS", "2"}}}),
    [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

// With HETCCL_NET_PLUGIN_ABI unset the newest exported version is taken.
TEST(NetPlugin, NewestVersionByDefault) {
  const std::string record = scratchFile("newest");
  JobOptions opt;
  opt.transport = "net";
  opt.env = {{"NETPLUGIN_TEST_RECORD", record}};
  runJob("a,b", opt, [](Rank& r) {
    int32_t in = r.rank + 1, out = 0;
    HC_ASSERT_OK(hetcclAllReduce(&in, &out, 1, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
    EXPECT_EQ(out, 3);
  });
  const std::string got = readFile(record);
  unlink(record.c_str());
  EXPECT_NE(got.find("init v12"), std::string::npos) << got;
  EXPECT_EQ(got.find("init v11"), std::string::npos) << got;
  EXPECT_EQ(got.find("init v8"), std::string::npos) << got;
}

// With HETCCL_NET_PLUGIN unset, NCCL_NET_PLUGIN names the plugin.
TEST(NetPlugin, NcclNetPluginIsTheFallback) {
  const char* path = getenv("HETCCL_NET_PLUGIN");
  ASSERT_TRUE(path && *path) << "CMake sets HETCCL_NET_PLUGIN for the mp tests";
  const std::string plugin = path;
  const std::string record = scratchFile("fallback");
  JobOptions opt;
  opt.transport = "net";
  opt.env = {{"NETPLUGIN_TEST_RECORD", record}};
  opt.beforeInit = [plugin](int) {
    unsetenv("HETCCL_NET_PLUGIN");
    setenv("NCCL_NET_PLUGIN", plugin.c_str(), 1);
  };
  runJob("a,b", opt, [](Rank& r) {
    int32_t in = r.rank + 1, out = 0;
    HC_ASSERT_OK(hetcclAllReduce(&in, &out, 1, hetcclInt32, hetcclSum, r.comm, nullptr), r.comm);
    EXPECT_EQ(out, 3);
  });
  const std::string got = readFile(record);
  unlink(record.c_str());
  EXPECT_NE(got.find("init v12"), std::string::npos) << "the plugin was not loaded through NCCL_NET_PLUGIN: " << got;
}

// Each plugin call fails once on rank 0 (its Nth call); rank 0's error, at
// init or in the AllReduce after it, names the call and the plugin, and rank
// 1 fails too instead of hanging.
class NetPluginFailingCall : public ::testing::TestWithParam<std::string> {};

TEST_P(NetPluginFailingCall, ErrorNamesTheCall) {
  const std::string spec = GetParam();  // call:N
  const std::string call = spec.substr(0, spec.find(':'));
  JobOptions opt;
  opt.transport = "net";
  opt.initMayFail = true;
  opt.deadlineS = 60;
  opt.env = {{"HETCCL_TIMEOUT_S", "5"}, {"NETPLUGIN_TEST_FLUSH", "1"}};
  opt.beforeInit = [spec](int rank) {
    if (rank == 0) setenv("NETPLUGIN_TEST_FAIL", spec.c_str(), 1);
  };
  runJob("a,b", opt, [call](Rank& r) {
    std::string text = r.initError;
    if (r.initResult == hetcclSuccess) {
      std::vector<float> buf(300000, 1.0f);
      hetcclResult_t res =
          hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, r.comm, nullptr);
      text = hetcclGetLastError(r.comm);
      EXPECT_NE(res, hetcclSuccess) << "rank " << r.rank << ": the AllReduce should fail";
      HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
      r.comm = nullptr;
    }
    if (r.rank == 0) {
      printf("[net] %s fails on rank 0: %s\n", call.c_str(), text.c_str());
      EXPECT_NE(text.find(call + " failed with ncclSystemError"), std::string::npos) << text;
      EXPECT_NE(text.find("net plugin 'hetccl-test-sockets'"), std::string::npos) << text;
    } else {
      EXPECT_FALSE(text.empty()) << "rank 1 should have failed";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Calls, NetPluginFailingCall,
                         ::testing::Values("init:1", "devices:1", "getProperties:1", "listen:1", "connect:1",
                                           "accept:1", "regMr:2", "isend:3", "irecv:3", "iflush:2", "test:5"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param.substr(0, i.param.find(':'));
                         });

// On an encrypted link, a byte the plugin alters in flight (the 3rd receive
// of rank 0: a header or a part) fails rank 0's call naming the sender
// instead of completing it with that data.
TEST(NetPlugin, AlteredDataOnAnEncryptedLinkFailsAuthentication) {
  JobOptions opt;
  opt.transport = "net";
  opt.env = {{"HETCCL_ENCRYPT", "all"}, {"HETCCL_TIMEOUT_S", "5"}};
  opt.beforeInit = [](int rank) {
    if (rank == 0) setenv("NETPLUGIN_TEST_FLIP", "3", 1);
  };
  runJob("a,b", opt, [](Rank& r) {
    std::vector<float> buf(300000, 1.0f);
    hetcclResult_t res = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, r.comm, nullptr);
    const std::string text = hetcclGetLastError(r.comm);
    if (r.rank == 0) {
      EXPECT_EQ(res, hetcclRemoteError) << text;
      EXPECT_NE(text.find("failed authentication"), std::string::npos) << text;
      EXPECT_NE(text.find("from rank 1"), std::string::npos) << text;
    } else if (res == hetcclSuccess) {  // its part may have been done: the next call meets rank 0's failure
      res = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, r.comm, nullptr);
      EXPECT_NE(res, hetcclSuccess) << "rank 1 should fail once rank 0 has";
    }
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

// Every rank's init fails with `word` in its error.
void expectInitFails(const std::vector<std::pair<std::string, std::string>>& env, const std::vector<std::string>& words,
                     const std::string& transport = "net") {
  JobOptions opt;
  opt.transport = transport;
  opt.initMayFail = true;
  opt.env = env;
  runJob("a,b", opt, [words](Rank& r) {
    EXPECT_NE(r.initResult, hetcclSuccess) << "init should fail";
    for (const std::string& w : words) EXPECT_NE(r.initError.find(w), std::string::npos) << r.initError;
  });
}

TEST(NetPlugin, UnknownVersionsRefused) {
  expectInitFails({{"HETCCL_NET_PLUGIN", HETCCL_TEST_NET_UNKNOWN}},
                  {HETCCL_TEST_NET_UNKNOWN, "no ABI version hetccl knows", "ncclNetPlugin_v99, ncclNetPlugin_v7"});
}

TEST(NetPlugin, MissingPluginRefused) {
  expectInitFails({{"HETCCL_NET_PLUGIN", "hetccl-absent"}},
                  {"libnccl-net-hetccl-absent.so", "cannot load the net plugin", "HETCCL_NET_PLUGIN"});
}

TEST(NetPlugin, VersionCapBelowEveryExportRefused) {
  expectInitFails({{"HETCCL_NET_PLUGIN_ABI", "7"}},
                  {"at or below HETCCL_NET_PLUGIN_ABI=7", "ncclNetPlugin_v12, ncclNetPlugin_v11"});
}

TEST(NetPlugin, BadTransportNameListsNet) {
  expectInitFails({}, {"unknown transport 'nett'", "inter=<auto|tcp|ucx|ofi|net>"}, "inter=nett");
}

}  // namespace
}  // namespace hmp
