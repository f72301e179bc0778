// transport/shm: how much shared memory the rings may take (HETCCL_SHM_MAX),
// what a killed job leaves in /dev/shm, and a failed rank telling its peers.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "transport/shm/shm_segment.h"
#include "transport/transport.h"
#include "unit_util.h"

namespace hetccl {
namespace {

using test::EnvGuard;

// 64 ranks on one host used 16 GB of /dev/shm with the default ring size:
// without an explicit HETCCL_BUFFSIZE the rings shrink to fit HETCCL_SHM_MAX.
TEST(ShmGeometry, DefaultRingsShrinkToTheHostBound) {
  EnvGuard a("HETCCL_BUFFSIZE", nullptr), b("HETCCL_SHM_MAX", nullptr), c("HETCCL_SHM_SLOT_BYTES", nullptr);
  ShmGeometry small = shmGeometry(4, size_t{4} << 20);
  EXPECT_EQ(small.slots, 16u);  // 4 MiB of 256 KiB slots: untouched
  EXPECT_LE(small.hostBytes, size_t{1} << 30);
  ShmGeometry big = shmGeometry(64, size_t{4} << 20);
  EXPECT_LE(big.hostBytes, size_t{1} << 30) << "64 ranks must stay within HETCCL_SHM_MAX (1G)";
  EXPECT_GE(big.slots, 2u);
  EXPECT_EQ(big.segBytes, kShmInboxHeader + 63 * big.ringBytes);
  EXPECT_EQ(big.hostBytes, 64 * big.segBytes);
}

TEST(ShmGeometry, AnExplicitRingSizeThatBreaksTheBoundIsRefusedWithTheFormula) {
  EnvGuard a("HETCCL_BUFFSIZE", "4M"), b("HETCCL_SHM_MAX", nullptr);
  EXPECT_HETCCL_ERROR(shmGeometry(64, size_t{4} << 20), hetcclInvalidArgument,
                      "64 ranks on this host need 64 x 63 rings");
  EXPECT_HETCCL_ERROR(shmGeometry(64, size_t{4} << 20), hetcclInvalidArgument, "HETCCL_SHM_MAX");
  EnvGuard c("HETCCL_BUFFSIZE", nullptr), d("HETCCL_SHM_MAX", "1M");
  EXPECT_HETCCL_ERROR(shmGeometry(64, size_t{4} << 20), hetcclInvalidArgument, "at least 2 slots");
  // Slots cannot be made smaller than the table allows.
  EnvGuard e("HETCCL_SHM_SLOT_BYTES", "1");
  EXPECT_HETCCL_ERROR(shmGeometry(2, size_t{4} << 20), hetcclInvalidArgument, "HETCCL_SHM_SLOT_BYTES is '1'");
}

// A segment whose creating process is gone is removed; one of a live process stays.
TEST(ShmSegments, WhatAKilledJobLeftIsRemovedNotWhatALiveOneHolds) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // a pid that is gone
  const std::string dead = shmSegmentName(child, 0x1234, 0), live = shmSegmentName(getpid(), 0x1234, 1);
  for (const std::string& name : {dead, live}) {
    int fd = createShmSegment(name, 4096);
    close(fd);
  }
  EXPECT_GE(removeStaleShmSegments(), 1);
  EXPECT_NE(access(("/dev/shm" + dead).c_str(), F_OK), 0) << dead << " is still there";
  EXPECT_EQ(access(("/dev/shm" + live).c_str(), F_OK), 0) << live << " was removed";
  shm_unlink(live.c_str());
}

// A rank whose communicator failed tells its peers: one waiting for it
// fails at once, naming it and its reason, not at its timeout.
TEST(ShmPoison, APeerWaitingOnAFailedRankFailsAtOnceNamingIt) {
  IdContents id = test::newJob();
  std::atomic<bool> aborts[2] = {false, false};
  test::expectAllOk(test::runRanks(2, [&](int r) {
    Bootstrap b(id, r, 2, {static_cast<uint8_t>(r)}, 60, nullptr);
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = 2;
    ctx.peers = {1 - r};
    ctx.bootstrap = &b;
    ctx.abort = &aborts[r];
    ctx.timeoutS = 30;
    auto t = createTransport("shm", ctx);
    b.barrier();
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      t->poison("collective mismatch found here");
    } else {
      MsgTag tag;
      tag.seq = 1;
      tag.coll = static_cast<uint16_t>(CollKind::kSendRecv);
      char buf[8];
      std::vector<Xfer> x{Xfer::recv(0, buf, sizeof(buf), tag)};
      auto t0 = std::chrono::steady_clock::now();
      auto err = test::catchError([&] { t->run(x); });
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_TRUE(err.has_value());
      if (err) {
        EXPECT_EQ(err->code(), hetcclRemoteError);
        EXPECT_NE(std::string(err->what()).find("rank 0's communicator failed"), std::string::npos) << err->what();
        EXPECT_NE(std::string(err->what()).find("collective mismatch found here"), std::string::npos) << err->what();
      }
      EXPECT_LT(took, 5.0);
    }
    b.barrier();
  }));
}

}  // namespace
}  // namespace hetccl
