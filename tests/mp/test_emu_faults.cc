// Failures of ranks on emulated GPUs: a peer that exits under a
// stream-ordered call (staged, device border, groups of two and unequal
// groups), abort while a stream waits, allocations that fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

// A stream-ordered call whose peer is gone: the stream does not hang, the
// communicator reports the failure naming the peer.
void peerExitsUnderAStreamOrderedCall(bool border, bool send = false) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  o.env.emplace_back("HETCCL_TIMEOUT_S", "5");
  borderEnv(o, border);
  runJob("a,b", o, [send](Rank& r) {
    warmUp(r);
    if (r.rank == 1) _exit(0);
    const size_t count = (size_t{1} << 20) + 3;
    DeviceBuffer b(r, count * 4);
    auto t0 = std::chrono::steady_clock::now();
    hetcclResult_t res = send ? hetcclSend(b.get(), count, hetcclFloat32, 1, r.comm, r.stream)
                              : hetcclAllReduce(b.get(), b.get(), count, hetcclFloat32, hetcclSum, r.comm, r.stream);
    std::string text = hetcclGetLastError(r.comm);
    syncStream(r);  // must come back
    EXPECT_LT(secondsSince(t0), 20);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    // Read once: the communicator records the failure before it lets the
    // stream go on, so a program that syncs and then asks reads it.
    if (res == hetcclSuccess) {  // enqueued: the failure comes later, on the communicator
      EXPECT_EQ(async, hetcclRemoteError);
      text = hetcclGetLastError(r.comm);
    } else {
      EXPECT_EQ(res, hetcclRemoteError) << text;
    }
    EXPECT_NE(text.find("rank 1"), std::string::npos) << "the error should name the peer: " << text;
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

// Groups of two (and of different sizes): a rank of the second group exits
// before a border AllReduce. Every other rank's call fails within the
// timeout, or leaves its communicator failed, with a message naming a rank
// that failed; none returns the call as a success with its communicator
// still healthy (the same-group rank and the other index's peers only meet
// the dead rank through the group steps or through the failed ranks).
void peerExitsUnderAGroupBorderCall(const char* layout, int victim) {
  JobOptions o;
  o.devices = parseDevices(std::string(layout) == "a,a,b,b" ? "emu,emu,emu,emu" : "emu,emu,emu,emu,emu");
  o.env.emplace_back("HETCCL_TIMEOUT_S", "5");
  borderEnv(o, true);
  runJob(layout, o, [victim](Rank& r) {
    warmUp(r);
    if (r.rank == victim) _exit(0);
    const size_t count = (size_t{1} << 18) + 3;
    DeviceBuffer b(r, count * 4);
    auto t0 = std::chrono::steady_clock::now();
    hetcclResult_t res = hetcclAllReduce(b.get(), b.get(), count, hetcclFloat32, hetcclSum, r.comm, r.stream);
    const std::string text = awaitFailure(r, res, t0, 15);
    EXPECT_LT(secondsSince(t0), 15);
    EXPECT_FALSE(text.empty()) << "rank " << r.rank << " saw no failure";
    EXPECT_NE(text.find("rank "), std::string::npos) << "the error should name a rank: " << text;
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

TEST(EmuFaults, PeerExitsUnderAStreamOrderedCall) { peerExitsUnderAStreamOrderedCall(false); }
TEST(EmuFaults, PeerExitsUnderAGroupBorderCall) { peerExitsUnderAGroupBorderCall("a,a,b,b", 2); }
TEST(EmuFaults, PeerExitsUnderAnUnequalGroupBorderCall) { peerExitsUnderAGroupBorderCall("a,a,a,b,b", 3); }
TEST(EmuFaults, PeerExitsUnderADeviceBorderCall) { peerExitsUnderAStreamOrderedCall(true); }
TEST(EmuFaults, PeerExitsUnderADeviceBorderSend) { peerExitsUnderAStreamOrderedCall(true, true); }

// Abort while the stream waits on a call the silent peer never joins: the
// stream goes on at once (nothing waits for the 30 s timeout), and a new
// communicator on the device works.
void abortReleasesAWaitingStream(bool border) {
  JobOptions o;
  o.devices = {testGpuKind(), testGpuKind()};
  borderEnv(o, border);
  runJob("a,b", o, [](Rank& r) {
    warmUp(r);
    if (r.rank == 1) return abortAfter(r, 3);
    DeviceBuffer b(r, 4000);
    HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), 1000, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    abortReleasesTheStream(r);
  });
}

TEST(EmuFaults, AbortReleasesAStreamWaitingOnTheCommunicator) { abortReleasesAWaitingStream(false); }
TEST(EmuFaults, AbortReleasesAStreamWaitingOnADeviceBorderCall) { abortReleasesAWaitingStream(true); }

// A rank whose memory runs out: an error naming memory on that rank, and the
// other ranks fail too, naming it, instead of waiting. The allocations of
// rank 1 in order: the communicator's pinned completion flag (init), the
// test's buffer, hetccl's staging (inside the first call).
void allocationFailsOnRank1(const char* nth) {
  JobOptions o;
  o.devices = {"emu", "emu", "emu"};
  o.initMayFail = true;
  o.env.emplace_back("HETCCL_TIMEOUT_S", "10");
  // In a call: the staged path, which takes device scratch on first use
  // (the device border allocates everything at init).
  if (std::string(nth) != "1") o.env.emplace_back("HETCCL_GPU_BORDER", "0");
  o.beforeInit = [nth](int rank) {
    if (rank == 1) setenv("HETCCL_EMU_FAIL_ALLOC", nth, 1);
  };
  runJob("a,a,b", o, [](Rank& r) {
    auto t0 = std::chrono::steady_clock::now();
    if (r.comm) {  // init passed: the first call that needs device memory fails instead
      DeviceBuffer b(r, 4 << 20);
      hetcclResult_t res = hetcclAllReduce(b.get(), b.get(), 1 << 20, hetcclFloat32, hetcclSum, r.comm, r.stream);
      syncStream(r);
      hetcclResult_t async = hetcclSuccess;
      HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
      std::string text = hetcclGetLastError(r.comm);
      EXPECT_TRUE(res != hetcclSuccess || async != hetcclSuccess) << "rank " << r.rank << " saw no failure";
      if (r.rank == 1) {
        EXPECT_NE(text.find("memory"), std::string::npos) << text;
      } else {
        EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
      }
      HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
      r.comm = nullptr;
    } else if (r.rank == 1) {
      EXPECT_NE(r.initError.find("memory"), std::string::npos) << r.initError;
    } else {
      EXPECT_NE(r.initError.find("rank 1"), std::string::npos) << r.initError;
    }
    EXPECT_LT(secondsSince(t0), 20);
  });
}

TEST(EmuFaults, AnAllocationThatFailsInInitIsAnErrorNotAHang) { allocationFailsOnRank1("1"); }
TEST(EmuFaults, AnAllocationThatFailsInACallIsAnErrorNotAHang) { allocationFailsOnRank1("3"); }

}  // namespace
}  // namespace hmp
