#include "observe/flight_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "core/log.h"

namespace hetccl {
namespace {

struct Registry {
  std::mutex mu;
  std::map<const void*, std::function<void(const std::string&)>> dumps;
  bool tried = false;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: the dump thread outlives static destruction
  return *r;
}

int gWakeFd = -1;  // the pipe's write end; set before the handler is installed

void onSignal(int) {
  const int saved = errno;
  const char b = 1;
  ssize_t n = write(gWakeFd, &b, 1);  // non-blocking: a full pipe already holds a request
  (void)n;
  errno = saved;
}

void dumpLoop(int fd) {
  char buf[64];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::lock_guard<std::mutex> g(registry().mu);
    for (const auto& d : registry().dumps) d.second("SIGUSR1");
  }
}

// Under the registry's lock, once per process.
void arm() {
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) {
    LOG_INFO(kInit, "SIGUSR1 has a handler of the program's: the flight recorder dumps on failure and abort only");
    return;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    LOG_WARN(kInit, "flight recorder: no pipe for SIGUSR1 (errno %d): dumps on failure and abort only", errno);
    return;
  }
  // The reader blocks; only the handler's end stays non-blocking.
  fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) & ~O_NONBLOCK);
  gWakeFd = p[1];
  std::thread(dumpLoop, p[0]).detach();
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGUSR1, &sa, nullptr) != 0)
    LOG_WARN(kInit, "flight recorder: SIGUSR1 handler not installed (errno %d)", errno);
  else
    LOG_INFO(kInit, "flight recorder: SIGUSR1 writes every communicator's dump to HETCCL_FLIGHT_DIR");
}

}  // namespace

void watchFlightSignal(const void* key, std::function<void(const std::string& reason)> dump) {
  std::lock_guard<std::mutex> g(registry().mu);
  if (!registry().tried) {
    registry().tried = true;
    arm();
  }
  registry().dumps[key] = std::move(dump);
}

void unwatchFlightSignal(const void* key) {
  std::lock_guard<std::mutex> g(registry().mu);
  registry().dumps.erase(key);
}

}  // namespace hetccl
