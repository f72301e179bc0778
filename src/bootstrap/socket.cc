#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "bootstrap/sealed_stream.h"
#include "core/settings.h"
#include "core/error.h"

namespace hetccl {

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
  inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
}

bool SockAddr::isLoopback() const {
  if (ss.ss_family == AF_INET) return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss.ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
  return false;
}

uint16_t SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
}

void SockAddr::setPort(uint16_t port) {
  if (ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
}

SockAddr SockAddr::parse(const std::string& hostPort) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':')
      throwError(hetcclInvalidArgument, "bad address '" + hostPort + "': expected [v6]:port");
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throwError(hetcclInvalidArgument, "bad address '" + hostPort + "': expected host:port");
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  int64_t p = parseInt(port, "port");
  if (p < 0 || p > 65535) throwError(hetcclInvalidArgument, "bad port in '" + hostPort + "'");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) throwError(hetcclInvalidArgument, "cannot resolve '" + host + "': " + gai_strerror(rc));
  SockAddr out;
  memcpy(&out.ss, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  freeaddrinfo(res);
  out.setPort(static_cast<uint16_t>(p));
  return out;
}

SockAddr SockAddr::local() {
  std::string want = settings::kSocketIfname.get();
  ifaddrs* list = nullptr;
  SockAddr out;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      int fam = i->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (fam == AF_INET6 && want.empty()) continue;  // prefer IPv4 unless asked
      bool loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
      if (want.empty() ? loop : strncmp(i->ifa_name, want.c_str(), want.size()) != 0) continue;
      out.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      memcpy(&out.ss, i->ifa_addr, out.len);
      break;
    }
    freeifaddrs(list);
  }
  if (out.len == 0) {
    if (!want.empty())
      throwError(hetcclInvalidArgument, "HETCCL_SOCKET_IFNAME=" + want + ": no interface of that name is up");
    return parse("127.0.0.1:0");
  }
  out.setPort(0);
  return out;
}

Deadline Deadline::in(double seconds, const std::atomic<bool>* abort) {
  Deadline d;
  d.at = std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  d.abort = abort;
  return d;
}

int Deadline::sliceMs() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - std::chrono::steady_clock::now()).count();
  if (left < 0) return 0;
  return left > 100 ? 100 : static_cast<int>(left);
}

Socket::Socket() = default;
Socket::Socket(int fd) : fd_(fd) {}
Socket::~Socket() { close(); }
Socket::Socket(Socket&& o) noexcept : fd_(o.fd_), sealed_(std::move(o.sealed_)) { o.fd_ = -1; }

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
    sealed_ = std::move(o.sealed_);
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  sealed_.reset();
}

void Socket::seal(const secure::LinkKeys& keys, bool client, const std::string& what) const {
  sealed_ = std::make_unique<SealedStream>(keys, client, what);
}

void Socket::sendAll(const void* buf, size_t n, const Deadline& dl, const std::string& what) const {
  if (sealed_) return sealed_->sendAll(*this, buf, n, dl, what);
  rawSendAll(buf, n, dl, what);
}

void Socket::recvAll(void* buf, size_t n, const Deadline& dl, const std::string& what) const {
  if (sealed_) return sealed_->recvAll(*this, buf, n, dl, what);
  rawRecvAll(buf, n, dl, what);
}

size_t Socket::sendSome(const void* buf, size_t n, const std::string& what) const {
  return sealed_ ? sealed_->sendSome(*this, buf, n, what) : rawSendSome(buf, n, what);
}

size_t Socket::recvSome(void* buf, size_t n, const std::string& what) const {
  return sealed_ ? sealed_->recvSome(*this, buf, n, what) : rawRecvSome(buf, n, what);
}

Socket Socket::listen(const SockAddr& addr, int backlog) {
  int fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throwSystemError("socket", errno);
  Socket s(fd);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0)
    throwSystemError("bind " + addr.str(), errno);
  if (::listen(fd, backlog) != 0) throwSystemError("listen " + addr.str(), errno);
  return s;
}

SockAddr Socket::boundAddr() const {
  SockAddr a;
  a.len = sizeof(a.ss);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
  return a;
}

Waker::Waker() {
  if (::pipe2(fds_, O_NONBLOCK | O_CLOEXEC) != 0) throwSystemError("pipe2", errno);
}

Waker::~Waker() {
  ::close(fds_[0]);
  ::close(fds_[1]);
}

void Waker::notify() const {
  char b = 1;
  ssize_t r = ::write(fds_[1], &b, 1);  // a full pipe already wakes the poller
  (void)r;
}

void Waker::drain() const {
  char buf[64];
  while (::read(fds_[0], buf, sizeof(buf)) > 0) {
  }
}

Socket Socket::accept(int waitMs, const Waker* wake) const {
  pollfd p[2] = {{fd_, POLLIN, 0}, {wake ? wake->fd() : -1, POLLIN, 0}};
  int rc = ::poll(p, wake ? 2 : 1, waitMs);
  if (rc <= 0) return Socket();
  if (wake && (p[1].revents & POLLIN)) wake->drain();
  if (!(p[0].revents & POLLIN)) return Socket();
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  Socket s(fd);
  s.setNoDelay();  // handshakes and control messages are small: no Nagle delay
  return s;
}

Socket Socket::connect(const SockAddr& addr, const Deadline& dl, const std::string& what) {
  int delayMs = 1;
  for (;;) {
    if (dl.aborted()) throwError(hetcclRemoteError, "aborted while connecting to " + what);
    int fd = ::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throwSystemError("socket", errno);
    Socket s(fd);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) == 0) {
      s.setNoDelay();  // handshakes and control messages are small: no Nagle delay
      return s;
    }
    int err = errno;
    // A reset during connect is a listener that dropped the attempt (closing
    // or overflowing): the same as a refusal, so it is retried until the deadline.
    if (err != ECONNREFUSED && err != ECONNRESET && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH &&
        err != EAGAIN)
      throwSystemError("connect to " + what + " at " + addr.str(), err);
    if (dl.passed())
      throwError(hetcclRemoteError,
                 "connect to " + what + " at " + addr.str() + ": " + strerror(err) + " until the timeout");
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = delayMs < 100 ? delayMs * 2 : 100;
  }
}

void Socket::rawSendAll(const void* buf, size_t n, const Deadline& dl, const std::string& what) const {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == EPIPE || errno == ECONNRESET) throwError(hetcclRemoteError, what + ": connection closed by peer");
      throwSystemError(what, errno);
    }
    if (dl.aborted()) throwError(hetcclRemoteError, what + ": communicator aborted");
    if (dl.passed()) throwError(hetcclRemoteError, what + ": timed out sending");
    pollfd pf{fd_, POLLOUT, 0};
    ::poll(&pf, 1, dl.sliceMs());
  }
}

void Socket::rawRecvAll(void* buf, size_t n, const Deadline& dl, const std::string& what) const {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) throwError(hetcclRemoteError, what + ": connection closed by peer");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      if (errno == ECONNRESET) throwError(hetcclRemoteError, what + ": connection reset by peer");
      throwSystemError(what, errno);
    }
    if (dl.aborted()) throwError(hetcclRemoteError, what + ": communicator aborted");
    if (dl.passed()) throwError(hetcclRemoteError, what + ": timed out waiting for data");
    pollfd pf{fd_, POLLIN, 0};
    ::poll(&pf, 1, dl.sliceMs());
  }
}

size_t Socket::rawSendSome(const void* buf, size_t n, const std::string& what) const {
  ssize_t r = ::send(fd_, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (r >= 0) return static_cast<size_t>(r);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == EPIPE || errno == ECONNRESET) throwError(hetcclRemoteError, what + ": connection closed by peer");
  throwSystemError(what, errno);
}

size_t Socket::rawRecvSome(void* buf, size_t n, const std::string& what) const {
  ssize_t r = ::recv(fd_, buf, n, MSG_DONTWAIT);
  if (r > 0) return static_cast<size_t>(r);
  if (r == 0) throwError(hetcclRemoteError, what + ": connection closed by peer");
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  if (errno == ECONNRESET) throwError(hetcclRemoteError, what + ": connection reset by peer");
  throwSystemError(what, errno);
}

void Socket::setNonBlocking(bool on) const {
  int fl = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

void Socket::setNoDelay() const {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::setBuffers(size_t bytes) const {
  int b = static_cast<int>(bytes);
  setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
}

}  // namespace hetccl
