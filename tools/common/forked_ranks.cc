#include "forked_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace hetccl_tools {

ForkedRanks::~ForkedRanks() {
  killRemaining();
  for (Proc& p : ranks_) {
    if (p.fd >= 0) close(p.fd);
    if (p.idFd >= 0) close(p.idFd);
  }
}

bool ForkedRanks::start(int n, bool idAfterFork, const Child& child, std::string* error) {
  ranks_.assign(n, Proc{});
  fflush(nullptr);  // or the children would flush the parent's buffered output again
  for (int i = 0; i < n; ++i) {
    int lines[2], id[2] = {-1, -1};
    if (pipe2(lines, O_CLOEXEC) != 0 || (idAfterFork && pipe2(id, O_CLOEXEC) != 0)) {
      *error = std::string("pipe: ") + strerror(errno);
      killRemaining();
      return false;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      *error = std::string("fork: ") + strerror(errno);
      killRemaining();
      return false;
    }
    if (pid == 0) {
      close(lines[0]);
      if (id[1] >= 0) close(id[1]);
      for (int j = 0; j < i; ++j) {  // the other ranks' pipes are the parent's
        close(ranks_[j].fd);
        if (ranks_[j].idFd >= 0) close(ranks_[j].idFd);
      }
      child(i, lines[1], id[0]);
      _exit(0);
    }
    close(lines[1]);
    if (id[0] >= 0) close(id[0]);
    fcntl(lines[0], F_SETFL, O_NONBLOCK);
    ranks_[i].pid = pid;
    ranks_[i].fd = lines[0];
    ranks_[i].idFd = id[1];
  }
  return true;
}

bool ForkedRanks::sendId(const hetcclUniqueId& id) {
  bool all = true;
  for (Proc& p : ranks_) {
    if (p.idFd < 0) continue;
    all &= write(p.idFd, id.internal, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
    close(p.idFd);
    p.idFd = -1;
  }
  return all;
}

bool readId(int idFd, hetcclUniqueId* id) {
  size_t got = 0;
  while (got < sizeof(*id)) {
    const ssize_t r = read(idFd, id->internal + got, sizeof(*id) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  close(idFd);
  return true;
}

void ForkedRanks::pump(int waitMs, const std::function<void(int, const std::string&)>& onLine) {
  std::vector<pollfd> pfds;
  std::vector<int> who;
  for (int i = 0; i < size(); ++i)
    if (ranks_[i].fd >= 0) {
      pfds.push_back(pollfd{ranks_[i].fd, POLLIN, 0});
      who.push_back(i);
    }
  if (!pfds.empty())
    poll(pfds.data(), pfds.size(), waitMs);
  else if (waitMs > 0)
    usleep(static_cast<useconds_t>(waitMs) * 1000);
  for (size_t k = 0; k < pfds.size(); ++k) {
    Proc& p = ranks_[who[k]];
    char buf[65536];
    for (;;) {
      const ssize_t got = read(p.fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        if (got == 0 || errno != EAGAIN) {
          close(p.fd);
          p.fd = -1;
        }
        break;
      }
      p.pending.append(buf, static_cast<size_t>(got));
      size_t at;
      while ((at = p.pending.find('\n')) != std::string::npos) {
        const std::string line = p.pending.substr(0, at);
        p.pending.erase(0, at + 1);
        onLine(who[k], line);
      }
    }
  }
  for (Proc& p : ranks_)
    if (!p.ended && p.pid > 0 && waitpid(p.pid, &p.status, WNOHANG) == p.pid) p.ended = true;
}

bool ForkedRanks::anyOpen() const {
  for (const Proc& p : ranks_)
    if (p.fd >= 0) return true;
  return false;
}

bool ForkedRanks::allEnded() const {
  for (const Proc& p : ranks_)
    if (!p.ended) return false;
  return true;
}

void ForkedRanks::signal(int r, int sig) {
  if (!ranks_[r].ended && ranks_[r].pid > 0) kill(ranks_[r].pid, sig);
}

std::vector<int> ForkedRanks::killRemaining() {
  std::vector<int> killed;
  for (int i = 0; i < size(); ++i) {
    Proc& p = ranks_[i];
    if (p.ended || p.pid <= 0) continue;
    kill(p.pid, SIGKILL);
    waitpid(p.pid, &p.status, 0);
    p.ended = true;
    killed.push_back(i);
  }
  return killed;
}

}  // namespace hetccl_tools
