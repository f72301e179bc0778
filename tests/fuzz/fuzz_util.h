// Helpers shared by the libFuzzer targets: a reader that takes typed fields
// from the fuzzer's bytes, socket pairs that stand in for a network peer, a
// writer thread that plays the peer's bytes (optionally in fixed pieces), and
// FUZZ_CHECK, whose failure aborts (libFuzzer reports it as a crash and keeps
// the input).
//
// A target's oracle is more than "does not crash": each states what the code
// under test must have done with the input (accepted exactly the valid ones,
// delivered the bytes that were sent, refused with a hetccl::Error of the
// documented kind). Any exception that is not a hetccl::Error escapes and
// terminates, which is a crash too.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap/socket.h"
#include "core/error.h"

namespace fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* cond, const char* detail) {
  fprintf(stderr, "FUZZ CHECK FAILED at %s:%d: %s%s%s\n", file, line, cond, detail ? " -- " : "", detail ? detail : "");
  abort();
}

#define FUZZ_CHECK(cond)                                           \
  do {                                                             \
    if (!(cond)) ::fuzz::fail(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)
#define FUZZ_CHECK_MSG(cond, detail)                                \
  do {                                                              \
    if (!(cond)) ::fuzz::fail(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)

// Outcome counters, printed at exit when HETCCL_FUZZ_STATS is set, to see
// which paths a corpus reaches (e.g. how many inputs pass the handshake).
// Only the fuzzing thread calls note().
inline std::vector<std::pair<std::string, unsigned long long>>& statCounts() {
  static auto* c = new std::vector<std::pair<std::string, unsigned long long>>;  // read at exit
  return *c;
}
inline void note(const char* what) {
  static const bool registered = [] {
    if (getenv("HETCCL_FUZZ_STATS"))
      atexit([] {
        for (const auto& [name, n] : statCounts()) fprintf(stderr, "stat::outcome %-44s %llu\n", name.c_str(), n);
      });
    return true;
  }();
  (void)registered;
  for (auto& [name, n] : statCounts())
    if (name == what) return void(++n);
  statCounts().emplace_back(what, 1);
}

// Takes fields off the front of the input; zeros once it is used up.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  size_t left() const { return n_; }
  template <class T>
  T take() {
    T v{};
    size_t k = std::min(sizeof(T), n_);
    memcpy(&v, p_, k);
    p_ += k;
    n_ -= k;
    return v;
  }
  uint8_t byte() { return take<uint8_t>(); }
  bool flag() { return (byte() & 1) != 0; }
  std::vector<uint8_t> bytes(size_t k) {
    k = std::min(k, n_);
    std::vector<uint8_t> v(p_, p_ + k);
    p_ += k;
    n_ -= k;
    return v;
  }
  std::vector<uint8_t> rest() { return bytes(n_); }

 private:
  const uint8_t* p_;
  size_t n_;
};

// A connected AF_UNIX stream pair, as hetccl Sockets (they only use
// send/recv/poll, so a socket pair stands in for TCP).
inline std::pair<hetccl::Socket, hetccl::Socket> socketPair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    perror("socketpair");
    abort();
  }
  return {hetccl::Socket(fds[0]), hetccl::Socket(fds[1])};
}

// Writes everything; false once the other side is gone or `stop` is set
// while the socket is full.
inline bool writeAll(int fd, const void* buf, size_t n, const std::atomic<bool>* stop = nullptr) {
  auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (stop && stop->load()) return false;
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, 10);
      continue;
    }
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Reads until `n` bytes arrived, EOF, or `ms` passed; returns what came.
inline std::vector<uint8_t> readUpTo(int fd, size_t n, int ms) {
  std::vector<uint8_t> out;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  uint8_t buf[4096];
  while (out.size() < n) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count());
    if (left <= 0) break;
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, left) <= 0) continue;
    ssize_t r = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) break;
    out.insert(out.end(), buf, buf + r);
  }
  return out;
}

// Everything readable now, until EOF or the socket would block.
inline std::vector<uint8_t> readAvailable(int fd) {
  std::vector<uint8_t> out;
  uint8_t buf[4096];
  for (;;) {
    ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.insert(out.end(), buf, buf + r);
  }
  return out;
}

// Plays a peer that sends `bytes` to `fd` and then shuts its sending side
// down. With pieces, it first writes one piece after another (then the rest
// at once) and waits (bounded) until the reader `readerFd` drained each one,
// so the reader's reads end at the piece boundaries.
class Writer {
 public:
  Writer(int fd, std::vector<uint8_t> bytes, std::vector<size_t> pieces = {}, int readerFd = -1)
      : fd_(fd), bytes_(std::move(bytes)), pieces_(std::move(pieces)), readerFd_(readerFd) {
    if (pieces_.empty()) {  // usually fits in the socket buffer: no thread needed
      while (off_ < bytes_.size()) {
        ssize_t r = ::send(fd_, bytes_.data() + off_, bytes_.size() - off_, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r <= 0) break;
        off_ += static_cast<size_t>(r);
      }
      if (off_ == bytes_.size()) {
        ::shutdown(fd_, SHUT_WR);
        return;
      }
    }
    t_ = std::thread([this] { play(); });
  }
  ~Writer() { join(); }
  // Call before the reader's socket is closed: a writer still blocked on a
  // full socket gives up.
  void join() {
    stop_.store(true);
    if (t_.joinable()) t_.join();
  }

 private:
  void play() {
    size_t off = off_, k = 0;
    while (off < bytes_.size()) {
      const bool piece = k < pieces_.size();
      size_t n = piece ? std::min(std::max<size_t>(pieces_[k++], 1), bytes_.size() - off) : bytes_.size() - off;
      if (!writeAll(fd_, bytes_.data() + off, n, &stop_)) break;
      off += n;
      if (piece && readerFd_ >= 0) {
        for (int i = 0; i < 2000 && !stop_.load(); ++i) {  // at most ~20 ms
          int unread = 0;
          if (ioctl(readerFd_, FIONREAD, &unread) != 0 || unread == 0) break;
          std::this_thread::sleep_for(std::chrono::microseconds(10));
        }
      }
    }
    ::shutdown(fd_, SHUT_WR);
  }

  int fd_;
  std::vector<uint8_t> bytes_;
  std::vector<size_t> pieces_;
  int readerFd_;
  size_t off_ = 0;  // written before the thread started
  std::atomic<bool> stop_{false};
  std::thread t_;
};

}  // namespace fuzz
