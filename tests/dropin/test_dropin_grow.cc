// ncclCommGetUniqueId and ncclCommGrow through the drop-in, loaded by path:
// two host ranks (threads) grow to three, the new rank keeps its number and
// an AllReduce on the grown communicator is right; bad arguments are
// ncclInvalidArgument naming them. One group: the drop-in grows through
// hetccl in any layout, as it shrinks (across groups: mp.*Grow*, the same
// code behind the C API).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dropin_fixture.h"

namespace {

using dropin_test::Comm;
using dropin_test::Id;
constexpr int kInvalidArgument = 4;

class DropInGrow : public dropin_test::DropIn {};

TEST_F(DropInGrow, TwoRanksGrowToThreeAndComputeRight) {
  setenv("HETCCL_DEVICE", "host", 1);
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto growId = fn<int (*)(Comm, Id*)>("ncclCommGetUniqueId");
  auto grow = fn<int (*)(Comm, int, const Id*, int, Comm*, void*)>("ncclCommGrow");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto count = fn<int (*)(Comm, int*)>("ncclCommCount");
  auto userRank = fn<int (*)(Comm, int*)>("ncclCommUserRank");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  Id grownId{};
  std::atomic<bool> idReady{false};
  std::vector<std::string> errs(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      Comm c = nullptr, nc = nullptr;
      if (r < 2) {
        if (init(&c, 2, id, r) != 0) return void(errs[r] = std::string("init: ") + lastError(nullptr));
        if (r == 0) {
          if (growId(c, nullptr) != kInvalidArgument) errs[r] += "a NULL id pointer was taken; ";
          if (growId(c, &grownId) != 0) return void(errs[r] += std::string("get id: ") + lastError(c));
          idReady = true;
        }
        if (grow(c, 3, r == 0 ? &grownId : nullptr, -1, &nc, nullptr) != 0)
          return void(errs[r] += std::string("grow: ") + lastError(c));
      } else {
        Comm none = reinterpret_cast<Comm>(0x1);
        if (grow(nullptr, 3, nullptr, 2, &none, nullptr) != kInvalidArgument || none != nullptr ||
            std::string(lastError(nullptr)).find("uniqueId is NULL") == std::string::npos)
          errs[r] += std::string("no id: ") + lastError(nullptr) + "; ";
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!idReady && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        if (grow(nullptr, 3, &grownId, 2, &nc, nullptr) != 0)
          return void(errs[r] += std::string("grow: ") + lastError(nullptr));
      }
      int k = 0, me = -1;
      if (count(nc, &k) != 0 || k != 3) errs[r] += "count " + std::to_string(k) + "; ";
      if (userRank(nc, &me) != 0 || me != r) errs[r] += "rank " + std::to_string(me) + "; ";
      std::vector<float> x(1000, static_cast<float>(r + 1)), sum(1000);
      if (allReduce(x.data(), sum.data(), 1000, 7 /*float*/, 0 /*sum*/, nc, nullptr) != 0 || sum[999] != 6.0f)
        errs[r] += std::string("allreduce: ") + lastError(nc) + "; ";
      if (destroy(nc) != 0) errs[r] += "destroy grown; ";
      if (c && destroy(c) != 0) errs[r] += "destroy; ";
    });
  for (auto& t : ts) t.join();
  unsetenv("HETCCL_DEVICE");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
}

}  // namespace
