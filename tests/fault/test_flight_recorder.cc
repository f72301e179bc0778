// The flight recorder and hetccl-doctor on the faults users meet: one rank
// of four stalls (SIGSTOP) before a call the others have entered, or gives
// a different root to one Broadcast. The ranks that fail dump their last
// calls to HETCCL_FLIGHT_DIR; hetccl-doctor, run on that folder, must name
// the stalled rank as behind (it writes no dump) and the call the others
// wait in, or the mismatched call and the ranks on each side.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "command_output.h"
#include "fault_job.h"

#ifndef HETCCL_DOCTOR
#error "HETCCL_DOCTOR must be the path of tools/hetccl-doctor"
#endif

namespace hfault {
namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/hetccl-flight-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? d : "";
}

// Runs the doctor on dir; returns its output (stdout and stderr) and exit status.
std::string doctor(const std::string& dir, int* status) {
  std::string cmd = std::string("/usr/bin/python3 ") + HETCCL_DOCTOR + " " + dir + " 2>&1";
  return hetccl_test::commandOutput(cmd, status);
}

// 12 AllReduce calls; rank 2 stops itself (SIGSTOP) before the tenth.
int stallBody(RankCtx& ctx) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  std::vector<float> buf(4096, 1.0f);
  for (int i = 0; i < 12; ++i) {
    if (ctx.rank == 2 && i == 9) {
      ctx.report("stopping", now());
      raise(SIGSTOP);
    }
    r = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, comm, nullptr);
    if (r != hetcclSuccess) {
      ctx.reportCall("ar", r, comm);
      ctx.report("ar.iter", i);
      break;
    }
  }
  hetcclCommAbort(comm);
  return 0;
}

TEST(FlightRecorder, DoctorNamesTheStalledRank) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  JobSpec spec;
  spec.timeoutS = 3;
  spec.env = {{"HETCCL_FLIGHT_DIR", dir}};
  Job job(spec, stallBody);
  ASSERT_TRUE(job.started()) << job.startError();
  // The three others fail the tenth call within the timeout, and dump
  // (ar.iter is a rank's last report of the call).
  job.waitUntil([&] { return job.has(0, "ar.iter") && job.has(1, "ar.iter") && job.has(3, "ar.iter"); }, 30);
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(job.has(r, "ar.code")) << job.describe();
    EXPECT_EQ(job.get(r, "ar.iter"), "9") << job.describe();
  }
  job.signal(2, SIGKILL);
  EXPECT_TRUE(job.finish(20)) << job.describe();

  int status = -1;
  const std::string out = doctor(dir, &status);
  printf("[fault] hetccl-doctor %s:\n%s", dir.c_str(), out.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("BEHIND: rank 2 wrote no dump"), std::string::npos) << out;
  EXPECT_NE(out.find("#10 AllReduce (count 4096, float, sum), failed"), std::string::npos) << out;
  EXPECT_NE(out.find("dumps from ranks 0, 1, 3"), std::string::npos) << out;
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

// Rank 1 names another root for the third call (a Broadcast): every rank
// fails it (the root travels in the headers), and the doctor shows the
// mismatch and who is on each side.
int rootMismatchBody(RankCtx& ctx) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  std::vector<int32_t> buf(1000, ctx.rank);
  for (int i = 0; i < 4; ++i) {
    const int root = i == 2 && ctx.rank == 1 ? 3 : 0;
    r = hetcclBroadcast(buf.data(), buf.data(), buf.size(), hetcclInt32, root, comm, nullptr);
    if (r != hetcclSuccess) {
      ctx.reportCall("bc", r, comm);
      break;
    }
  }
  hetcclCommAbort(comm);
  return 0;
}

TEST(FlightRecorder, DoctorShowsAMismatchedRoot) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  JobSpec spec;
  spec.timeoutS = 3;
  spec.env = {{"HETCCL_FLIGHT_DIR", dir}};
  Job job(spec, rootMismatchBody);
  ASSERT_TRUE(job.started()) << job.startError();
  EXPECT_TRUE(job.finish(30)) << job.describe();
  int status = -1;
  const std::string out = doctor(dir, &status);
  printf("[fault] hetccl-doctor %s:\n%s", dir.c_str(), out.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("MISMATCH in call #3"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 #3 Broadcast (count 1000, int32, root 3)"), std::string::npos) << out;
  EXPECT_EQ(out.find("BEHIND"), std::string::npos) << "ranks that failed a call are not behind: " << out;
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

// Every rank of a healthy job dumps on SIGUSR1 (as `kill -USR1` does to a
// job that looks stuck): five AllReduce calls, then each rank waits until
// its own dump is there. The dumps say why they were written, hold the five
// calls completed, and the doctor finds no rank behind.
bool hasFile(const std::string& dir, const std::string& suffix) {
  return hetccl_test::commandOutput("ls " + dir + " 2>/dev/null").find(suffix) != std::string::npos;
}

int signalBody(RankCtx& ctx) {
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = ctx.init(&comm);
  ctx.reportCall("init", r, nullptr);
  if (r != hetcclSuccess) return 2;
  std::vector<float> buf(1024, 1.0f);
  for (int i = 0; i < 5 && r == hetcclSuccess; ++i)
    r = hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, comm, nullptr);
  ctx.reportCall("ar", r, comm);
  const std::string dir = getenv("HETCCL_FLIGHT_DIR");
  const std::string mine = "-rank" + std::to_string(ctx.rank) + ".json";
  for (int i = 0; i < 400 && !hasFile(dir, mine); ++i) usleep(50 * 1000);
  ctx.report("dumped", hasFile(dir, mine) ? 1 : 0);
  hetcclCommDestroy(comm);
  return 0;
}

TEST(FlightRecorder, EveryRankDumpsOnSigusr1) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  JobSpec spec;
  spec.timeoutS = 10;
  spec.env = {{"HETCCL_FLIGHT_DIR", dir}};
  Job job(spec, signalBody);
  ASSERT_TRUE(job.started()) << job.startError();
  job.waitUntil(
      [&] { return job.has(0, "ar.code") && job.has(1, "ar.code") && job.has(2, "ar.code") && job.has(3, "ar.code"); },
      30);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(job.get(r, "ar.code"), "0") << job.describe();
    job.signal(r, SIGUSR1);
  }
  EXPECT_TRUE(job.finish(30)) << job.describe();
  for (int r = 0; r < 4; ++r) EXPECT_EQ(job.get(r, "dumped"), "1") << "rank " << r << ": " << job.describe();
  const std::string grep = "grep -l '\"SIGUSR1\"' " + dir + "/*.json | wc -l";
  int st = -1;
  const std::string counted = hetccl_test::commandOutput(grep, &st);
  ASSERT_EQ(st, 0) << grep;
  EXPECT_EQ(atoi(counted.c_str()), 4) << "dumps that name SIGUSR1 as their reason";
  int status = -1;
  const std::string out = doctor(dir, &status);
  printf("[fault] hetccl-doctor %s:\n%s", dir.c_str(), out.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("dumps from ranks 0, 1, 2, 3"), std::string::npos) << out;
  EXPECT_EQ(out.find("BEHIND"), std::string::npos) << out;
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST(FlightRecorder, DoctorSaysSoWhenThereIsNothingToRead) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  int status = -1;
  const std::string out = doctor(dir, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("no hetccl-flight"), std::string::npos) << out;
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace hfault
