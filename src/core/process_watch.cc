#include "core/process_watch.h"

#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hetccl {

namespace {

int openPidfd(int32_t pid) {
#ifdef SYS_pidfd_open
  const long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  if (fd >= 0) fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace

uint64_t processStartTicks(int32_t pid, bool* zombie, bool* gone) {
  *zombie = false;
  if (gone) *gone = false;
  if (pid <= 0) return 0;
  char path[48];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (gone) *gone = errno == ENOENT || errno == ESRCH;
    return 0;
  }
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  const int readErr = n < 0 ? errno : 0;
  close(fd);
  if (n <= 0) {
    if (gone) *gone = n == 0 || readErr == ESRCH;  // reaped after the open
    return 0;
  }
  buf[n] = 0;
  // "pid (comm) state f4 ... f22": comm may hold spaces and parentheses,
  // so the fields are counted from the last ')'.
  const char* p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  p += 2;
  *zombie = *p == 'Z' || *p == 'X';
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (!p) return 0;
    ++p;
  }
  return strtoull(p, nullptr, 10);
}

ProcessIdentity ProcessIdentity::self() {
  ProcessIdentity me;
  me.pid = static_cast<int32_t>(getpid());
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) == 0) me.pidNamespace = static_cast<uint64_t>(st.st_ino);
  bool zombie = false;
  me.startTicks = processStartTicks(me.pid, &zombie);
  return me;
}

ProcessWatch::~ProcessWatch() {
  for (const Watched& w : watched_)
    if (w.pidfd >= 0) close(w.pidfd);
}

bool ProcessWatch::add(int rank, const ProcessIdentity& who) {
  // Without both facts the pid may name another process: not watched (the
  // rank is then judged by the timeout alone).
  const ProcessIdentity me = ProcessIdentity::self();
  if (who.pid <= 0 || who.startTicks == 0 || who.pidNamespace == 0 || who.pidNamespace != me.pidNamespace) return false;
  const int fd = pidfds_ ? openPidfd(who.pid) : -1;
  // After the pidfd is open: if the pid still names the process with this
  // start time, the pidfd is that process's (a pid is not reused before
  // its process is reaped, and a reaped one has no pidfd to open).
  bool zombie = false;
  if (processStartTicks(who.pid, &zombie) != who.startTicks) {
    if (fd >= 0) close(fd);
    return false;
  }
  watched_.push_back(Watched{rank, who, fd});
  return true;
}

bool ProcessWatch::ended(const Watched& w) const {
  if (w.pidfd >= 0) {
    pollfd p{w.pidfd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }
  // Only a process known to be gone (or another one under its pid) ended:
  // /proc unreadable for another reason (out of file descriptors, a
  // signal) says nothing about it.
  bool zombie = false, gone = false;
  const uint64_t ticks = processStartTicks(w.id.pid, &zombie, &gone);
  if (ticks == 0) return gone;
  return ticks != w.id.startTicks || zombie;
}

int ProcessWatch::firstEnded(int32_t* pid, const std::function<bool(int rank)>& which) const {
  for (const Watched& w : watched_) {
    if ((which && !which(w.rank)) || !ended(w)) continue;
    if (pid) *pid = w.id.pid;
    return w.rank;
  }
  return -1;
}

size_t ProcessWatch::byPidfd() const {
  size_t n = 0;
  for (const Watched& w : watched_) n += w.pidfd >= 0 ? 1 : 0;
  return n;
}

}  // namespace hetccl
