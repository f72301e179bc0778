// core/process_watch.h: a watched process that is killed reads as ended
// (unreaped and reaped), a stopped one does not, and a pid that may name
// another process (another start time, another pid namespace) is not
// watched at all.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/process_watch.h"

namespace hetccl {
namespace {

// A child that sleeps until it is killed.
pid_t sleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

ProcessIdentity identityOf(pid_t pid) {
  ProcessIdentity id = ProcessIdentity::self();
  id.pid = pid;
  bool zombie = false;
  id.startTicks = processStartTicks(pid, &zombie);
  return id;
}

// firstEnded() within `seconds`, polled as the watcher does.
int endedWithin(const ProcessWatch& w, double seconds, int32_t* pid) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int r = -1;
  while ((r = w.firstEnded(pid)) < 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return r;
}

TEST(ProcessWatch, ThisProcessHasAnIdentity) {
  const ProcessIdentity me = ProcessIdentity::self();
  EXPECT_EQ(me.pid, getpid());
  EXPECT_NE(me.pidNamespace, 0u);
  EXPECT_NE(me.startTicks, 0u);
}

// Through a pidfd where the kernel gives one, and through /proc alone.
class ProcessWatchBoth : public ::testing::TestWithParam<bool> {};

TEST_P(ProcessWatchBoth, AKilledProcessEndsUnreapedAndReaped) {
  const pid_t child = sleeper();
  ASSERT_GT(child, 0);
  ProcessWatch w(GetParam());
  ASSERT_TRUE(w.add(3, identityOf(child)));
  if (!GetParam()) {
    EXPECT_EQ(w.byPidfd(), 0u);
  }
  EXPECT_EQ(w.firstEnded(nullptr), -1) << "a live process read as ended";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int32_t pid = 0;
  EXPECT_EQ(endedWithin(w, 2, &pid), 3) << "a killed (zombie) process did not read as ended";
  EXPECT_EQ(pid, child);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(w.firstEnded(nullptr), 3) << "a reaped process did not read as ended";
  bool zombie = false;
  EXPECT_EQ(processStartTicks(child, &zombie), 0u);
}

TEST_P(ProcessWatchBoth, AStoppedProcessHasNotEnded) {
  const pid_t child = sleeper();
  ASSERT_GT(child, 0);
  ProcessWatch w(GetParam());
  ASSERT_TRUE(w.add(1, identityOf(child)));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  EXPECT_EQ(endedWithin(w, 0.3, nullptr), -1) << "a stopped process read as ended";
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
}

INSTANTIATE_TEST_SUITE_P(ProcessWatch, ProcessWatchBoth, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "pidfd" : "proc"; });

TEST(ProcessWatch, APidThatMayNameAnotherProcessIsNotWatched) {
  const pid_t child = sleeper();
  ASSERT_GT(child, 0);
  ProcessWatch w;
  ProcessIdentity other = identityOf(child);
  other.startTicks += 1;  // the pid was reused by a later process
  EXPECT_FALSE(w.add(1, other));
  other = identityOf(child);
  other.pidNamespace += 1;  // published from another pid namespace
  EXPECT_FALSE(w.add(1, other));
  other = identityOf(child);
  other.startTicks = 0;  // unknown
  EXPECT_FALSE(w.add(1, other));
  EXPECT_EQ(w.size(), 0u);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  // A process gone before it was added is not watched either (its rank is
  // then judged by the timeout).
  EXPECT_FALSE(w.add(1, identityOf(child)));
}

TEST(ProcessWatch, AZombieReadsAsSuchThroughProc) {
  const pid_t child = sleeper();
  ASSERT_GT(child, 0);
  bool zombie = true;
  const uint64_t started = processStartTicks(child, &zombie);
  EXPECT_NE(started, 0u);
  EXPECT_FALSE(zombie);
  kill(child, SIGKILL);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!zombie && std::chrono::steady_clock::now() < end) {
    processStartTicks(child, &zombie);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(zombie) << "/proc did not show the killed child as a zombie";
  EXPECT_EQ(processStartTicks(child, &zombie), started);
  int status = 0;
  waitpid(child, &status, 0);
}

// Through /proc, a live process whose /proc entry cannot be opened (no
// file descriptor left) has not ended; one reaped reads as gone.
TEST(ProcessWatch, ProcUnreadableForWantOfDescriptorsIsNoDeath) {
  const pid_t child = sleeper();
  ASSERT_GT(child, 0);
  ProcessWatch w(false);
  ASSERT_TRUE(w.add(2, identityOf(child)));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit none = old;
  none.rlim_cur = 0;  // every open fails with EMFILE
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &none), 0);
  bool zombie = false, gone = true;
  const uint64_t ticks = processStartTicks(child, &zombie, &gone);
  const int ended = w.firstEnded(nullptr);
  setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_EQ(ticks, 0u);
  EXPECT_FALSE(gone) << "/proc unreadable was taken for a process gone";
  EXPECT_EQ(ended, -1) << "a live process read as ended for want of a file descriptor";
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(processStartTicks(child, &zombie, &gone), 0u);
  EXPECT_TRUE(gone);
  EXPECT_EQ(w.firstEnded(nullptr), 2);
}

}  // namespace
}  // namespace hetccl
