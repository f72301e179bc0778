// A GPU rank killed with kill -9 in the middle of a call: every survivor's
// call fails within seconds (not at HETCCL_TIMEOUT_S, 60 s here), naming
// the dead rank, on the device border (AllReduce, AllGather, send), where
// the dead rank is no border peer of a survivor (groups of two), and on
// the staged path; a stopped rank that comes back is not taken for dead.
// Survivors watch the processes of the other ranks on their host while a
// call waits (comm/host_ranks.cc). The a,b cases run on CUDA too
// (HETCCL_TEST_GPU=cuda: scripts/gpu-check.sh faults).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

constexpr double kLimitS = 5;  // from the call's start to its failure on every survivor

enum class Call { kAllReduce, kAllGather, kSend };

hetcclResult_t issue(Call call, Rank& r, DeviceBuffer& in, DeviceBuffer& out, size_t count) {
  switch (call) {
    case Call::kAllReduce:
      return hetcclAllReduce(in.get(), in.get(), count, hetcclFloat32, hetcclSum, r.comm, r.stream);
    case Call::kAllGather: return hetcclAllGather(in.get(), out.get(), count, hetcclFloat32, r.comm, r.stream);
    case Call::kSend:
      return r.rank == 0 ? hetcclSend(in.get(), count, hetcclFloat32, 1, r.comm, r.stream)
                         : hetcclRecv(out.get(), count, hetcclFloat32, 0, r.comm, r.stream);
  }
  return hetcclInternalError;
}

// `victim` enqueues the call too and is killed (SIGKILL, by itself) as
// the call returns, while its streams and its peers' are inside the call.
void killNineMidCall(const std::string& layout, const std::vector<std::string>& devices, int victim, Call call,
                     bool border) {
  JobOptions o;
  o.devices = devices;
  o.killedRank = victim;
  o.deadlineS = 60;
  o.env.emplace_back("HETCCL_TIMEOUT_S", "60");
  // Every emulated stream operation 200 us late: a call takes about a
  // second, so the kill comes before the victim's streams finish it.
  o.env.emplace_back("HETCCL_EMU_STALL_US", "200");
  borderEnv(o, border);
  runJob(layout, o, [victim, call](Rank& r) {
    warmUp(r);
    const size_t count = (size_t{4} << 20) + 3;  // 16 MiB: many slot uses of 64 KiB parts
    DeviceBuffer in(r, count * 4), out(r, count * 4 * static_cast<size_t>(r.nranks));
    const auto t0 = std::chrono::steady_clock::now();
    if (r.rank == victim && r.device != "emu") {
      // A real GPU may finish the victim's whole call before the kill
      // lands: there the victim dies before its call, its peers in theirs.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      raise(SIGKILL);
    }
    const hetcclResult_t res = issue(call, r, in, out, count);
    if (r.rank == victim) raise(SIGKILL);  // its streams are inside the call (slowed on emu: below)
    const std::string text = awaitFailure(r, res, t0, 30);
    const double took = secondsSince(t0);
    EXPECT_LT(took, kLimitS) << "rank " << r.rank << " learned of the dead rank after " << took << " s: " << text;
    EXPECT_FALSE(text.empty()) << "rank " << r.rank << " saw no failure";
    EXPECT_NE(text.find("rank " + std::to_string(victim)), std::string::npos)
        << "the error should name the dead rank: " << text;
    EXPECT_NE(text.find("died"), std::string::npos) << "the error should say the rank died: " << text;
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

TEST(EmuDeadPeer, KillNineMidBorderAllReduce) {
  killNineMidCall("a,b", {testGpuKind(), testGpuKind()}, 1, Call::kAllReduce, true);
}
TEST(EmuDeadPeer, KillNineMidBorderAllGather) {
  killNineMidCall("a,b", {testGpuKind(), testGpuKind()}, 1, Call::kAllGather, true);
}
TEST(EmuDeadPeer, KillNineOfTheReceiverMidBorderSend) {
  killNineMidCall("a,b", {testGpuKind(), testGpuKind()}, 1, Call::kSend, true);
}
// Rank 2 is the border peer of rank 0 only: rank 1 meets it nowhere in the
// call and rank 3 in its group's steps (the vendor library).
TEST(EmuDeadPeer, KillNineOfAGroupOfTwoMidBorderAllReduce) {
  killNineMidCall("a,a,b,b", parseDevices("emu,emu,emu,emu"), 2, Call::kAllReduce, true);
}
// Staged: the proxy runs the plan on pinned copies, the group steps in the
// vendor library.
TEST(EmuDeadPeer, KillNineOfAGroupOfTwoMidStagedAllReduce) {
  killNineMidCall("a,a,b,b", parseDevices("emu,emu,emu,emu"), 3, Call::kAllReduce, false);
}

// Rank 1 stops (SIGSTOP) with its AllReduce enqueued and goes on 2 s later
// (a process it forked sends SIGCONT): rank 0's call waits for it and ends
// with the right sum, as a stalled peer is judged by the timeout alone.
TEST(EmuDeadPeer, AStoppedPeerIsNotTakenForDead) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  o.env.emplace_back("HETCCL_TIMEOUT_S", "60");
  borderEnv(o, true);
  runJob("a,b", o, [](Rank& r) {
    warmUp(r);
    const size_t count = (size_t{1} << 20) + 3;
    DeviceBuffer b(r, count * 4);
    const std::vector<float> mine(count, static_cast<float>(r.rank + 1));
    b.upload(mine.data(), count * 4);
    const auto t0 = std::chrono::steady_clock::now();
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), count, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    if (r.rank == 1) {
      const pid_t self = getpid();
      const pid_t waker = fork();
      if (waker == 0) {  // async-signal-safe calls only: the parent has threads
        sleep(2);
        kill(self, SIGCONT);
        _exit(0);
      }
      ASSERT_GT(waker, 0);
      raise(SIGSTOP);
      int status = 0;
      EXPECT_EQ(waitpid(waker, &status, 0), waker);
    }
    syncStream(r);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    EXPECT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
    if (r.rank == 0) {
      EXPECT_GT(secondsSince(t0), 1.5) << "rank 0's call did not wait for the stopped rank";
    }
    const std::vector<float> sum = readFloats(b, count);
    EXPECT_EQ(sum.front(), 3.0f);
    EXPECT_EQ(sum.back(), 3.0f);
  });
}

}  // namespace
}  // namespace hmp
