#include "connect_hook.h"

#include <dlfcn.h>
#include <sys/socket.h>

#include <atomic>

namespace {
std::atomic<int> gConnectsLeft{0};  // 0: disarmed
std::function<void()>* gHook = nullptr;
}  // namespace

namespace hfault {
void armAfterConnect(int n, std::function<void()> hook) {
  gHook = new std::function<void()>(std::move(hook));
  gConnectsLeft = n;
}
}  // namespace hfault

extern "C" int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  using Fn = int (*)(int, const struct sockaddr*, socklen_t);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "connect"));
  int rc = real(fd, addr, len);
  if (rc == 0 && addr && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6) && gConnectsLeft.load() > 0 &&
      gConnectsLeft.fetch_sub(1) == 1 && gHook)
    (*gHook)();
  return rc;
}
