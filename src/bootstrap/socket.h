// TCP sockets with deadlines and an abort flag: every blocking call waits in
// poll() slices of at most 100 ms, so an abort is seen within that time and a
// silent peer becomes an error at the deadline. Used by the bootstrap and the
// TCP transport.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hetccl {

namespace secure {
struct LinkKeys;
}
class SealedStream;  // bootstrap/sealed_stream.h

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  std::string str() const;  // "1.2.3.4:5678" or "[::1]:5678"
  uint16_t port() const;
  void setPort(uint16_t port);
  // 127.0.0.0/8 or ::1: only this host can reach it.
  bool isLoopback() const;
  // "host:port", "[v6]:port"; host may be a name. Throws InvalidArgument.
  static SockAddr parse(const std::string& hostPort);
  // The address this host's listeners publish: HETCCL_SOCKET_IFNAME's
  // (prefix match), else the first up non-loopback IPv4 interface, else
  // 127.0.0.1. Port 0.
  static SockAddr local();
};

// A point in time after which waits fail, plus the abort flag that ends them
// sooner. A null abort pointer means "not abortable".
struct Deadline {
  std::chrono::steady_clock::time_point at;
  const std::atomic<bool>* abort = nullptr;

  static Deadline in(double seconds, const std::atomic<bool>* abort = nullptr);
  bool passed() const { return std::chrono::steady_clock::now() >= at; }
  bool aborted() const { return abort && abort->load(std::memory_order_relaxed); }
  // Milliseconds to wait in one poll slice (<= 100).
  int sliceMs() const;
};

// A self-pipe: notify() from any thread ends a wait that polls fd(), so an
// accept loop learns at once that a helper thread finished its part.
class Waker {
 public:
  Waker();
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  int fd() const { return fds_[0]; }
  void notify() const;
  void drain() const;

 private:
  int fds_[2] = {-1, -1};
};

class Socket {
 public:
  Socket();
  explicit Socket(int fd);
  ~Socket();
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  // Listening socket on addr (port 0: any free port).
  static Socket listen(const SockAddr& addr, int backlog = 512);
  SockAddr boundAddr() const;
  // Waits for a connection; returns an invalid Socket if none came by the
  // deadline's slice `waitMs` or `wake` was notified (so accept loops can
  // check other state).
  Socket accept(int waitMs, const Waker* wake = nullptr) const;
  // Connects, retrying refused connections until the deadline (the listener
  // may not be up yet). `what` names the peer in errors.
  static Socket connect(const SockAddr& addr, const Deadline& dl, const std::string& what);

  // Blocking transfers of exactly n bytes. Throw Error: RemoteError when the
  // peer closed or the deadline passed, SystemError on socket errors,
  // InvalidUsage... never partial. `what` names the peer and the step.
  void sendAll(const void* buf, size_t n, const Deadline& dl, const std::string& what) const;
  void recvAll(void* buf, size_t n, const Deadline& dl, const std::string& what) const;

  // Non-blocking pieces for progress loops: bytes moved, 0 if it would block.
  // Throw on a closed connection or an error. On a sealed socket sendSome
  // returns 0 until a whole record it sealed from `buf` is written, then the
  // record's plaintext length: after a 0 the caller passes the same bytes.
  size_t sendSome(const void* buf, size_t n, const std::string& what) const;
  size_t recvSome(void* buf, size_t n, const std::string& what) const;

  // From now on every byte both ways travels in encrypted records
  // (secure/record.h) under `keys`; `client`: this end connected. Both ends
  // seal right after the handshake (bootstrap connections between sites).
  void seal(const secure::LinkKeys& keys, bool client, const std::string& what) const;
  bool sealed() const { return sealed_ != nullptr; }

  // The same transfers, always on the socket's bytes as they are.
  void rawSendAll(const void* buf, size_t n, const Deadline& dl, const std::string& what) const;
  void rawRecvAll(void* buf, size_t n, const Deadline& dl, const std::string& what) const;
  size_t rawSendSome(const void* buf, size_t n, const std::string& what) const;
  size_t rawRecvSome(void* buf, size_t n, const std::string& what) const;

  void setNonBlocking(bool on) const;
  void setNoDelay() const;
  void setBuffers(size_t bytes) const;

 private:
  int fd_ = -1;
  mutable std::unique_ptr<SealedStream> sealed_;  // set once, by seal() after the handshake
};

}  // namespace hetccl
