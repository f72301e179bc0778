#include "bootstrap/root.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace hetccl {
namespace {

struct ReplyHeader {
  int32_t status;  // 0: table follows; otherwise msg says why
  uint32_t nranks;
  uint32_t recordBytes;
  uint32_t reserved;
  char msg[128];
};

struct Arrival {
  Socket sock;
  int rank;
  std::vector<uint8_t> record;
};

class RootServer {
 public:
  RootServer(Socket listener, IdContents id, double timeoutS)
      : listener_(std::move(listener)), id_(id), deadline_(Deadline::in(timeoutS)) {}

  void run() {
    std::vector<std::thread> helpers;
    while (!done() && !deadline_.passed()) {
      Socket s = listener_.accept(100);
      if (!s.valid()) continue;
      // Each connection is vetted on its own thread so a silent or hostile
      // client cannot stall the others.
      helpers.emplace_back([this, sock = std::move(s)]() mutable { admit(std::move(sock)); });
    }
    for (auto& t : helpers) t.join();
    if (!done()) {
      LOG_WARN(kBootstrap, "rendezvous root %s: gave up after the timeout with %zu of %d ranks",
               id_.root.str().c_str(), arrived_.size(), nranks_);
      return;
    }
    reply();
  }

 private:
  bool done() {
    std::lock_guard<std::mutex> g(mu_);
    return nranks_ > 0 && static_cast<int>(arrived_.size()) == nranks_;
  }

  void refuse(const Socket& s, const std::string& why) {
    LOG_WARN(kBootstrap, "rendezvous root: refused a rank: %s", why.c_str());
    ReplyHeader h{};
    h.status = 1;
    snprintf(h.msg, sizeof(h.msg), "%s", why.c_str());
    try {
      s.sendAll(&h, sizeof(h), Deadline::in(1), "refusal");
    } catch (const Error&) {
    }
  }

  void admit(Socket s) {
    try {
      Deadline dl = Deadline::in(10);
      PeerHello hello = serverHandshake(s, id_.secret, id_.jobId, Service::kRoot, dl);
      uint32_t len = 0;
      s.recvAll(&len, sizeof(len), dl, "rendezvous record size");
      if (len == 0 || len > kMaxRecordBytes) return refuse(s, "record size " + std::to_string(len) + " out of range");
      std::vector<uint8_t> rec(len);
      s.recvAll(rec.data(), len, dl, "rendezvous record");
      std::lock_guard<std::mutex> g(mu_);
      if (hello.nranks <= 0 || hello.nranks > kMaxRanks)
        return refuse(s, "nranks " + std::to_string(hello.nranks) + " out of range");
      if (nranks_ == 0) nranks_ = hello.nranks;
      if (hello.nranks != nranks_)
        return refuse(s, "rank " + std::to_string(hello.rank) + " says nranks=" + std::to_string(hello.nranks) +
                             " but another rank said " + std::to_string(nranks_));
      if (hello.rank < 0 || hello.rank >= nranks_) return refuse(s, "rank " + std::to_string(hello.rank) + " out of range");
      if (recordBytes_ == 0) recordBytes_ = len;
      if (len != recordBytes_) return refuse(s, "record size differs between ranks (mixed library versions?)");
      for (const auto& a : arrived_)
        if (a.rank == hello.rank) return refuse(s, "rank " + std::to_string(hello.rank) + " joined twice");
      arrived_.push_back(Arrival{std::move(s), hello.rank, std::move(rec)});
    } catch (const Error& e) {
      LOG_INFO(kBootstrap, "rendezvous root: dropped a connection: %s", e.what());
    }
  }

  void reply() {
    std::vector<uint8_t> table(static_cast<size_t>(nranks_) * recordBytes_);
    for (const auto& a : arrived_) memcpy(table.data() + static_cast<size_t>(a.rank) * recordBytes_, a.record.data(), recordBytes_);
    ReplyHeader h{};
    h.nranks = static_cast<uint32_t>(nranks_);
    h.recordBytes = recordBytes_;
    for (const auto& a : arrived_) {
      try {
        Deadline dl = Deadline::in(30);
        a.sock.sendAll(&h, sizeof(h), dl, "rendezvous reply");
        a.sock.sendAll(table.data(), table.size(), dl, "rendezvous reply");
      } catch (const Error& e) {
        LOG_WARN(kBootstrap, "rendezvous root: rank %d: %s", a.rank, e.what());
      }
    }
    LOG_INFO(kBootstrap, "rendezvous root %s: %d ranks joined", id_.root.str().c_str(), nranks_);
  }

  Socket listener_;
  IdContents id_;
  Deadline deadline_;
  std::mutex mu_;
  int nranks_ = 0;
  uint32_t recordBytes_ = 0;
  std::vector<Arrival> arrived_;
};

}  // namespace

IdContents startRootServer(const SockAddr& listenAt, const IdContents& job, double timeoutS) {
  Socket l = Socket::listen(listenAt);
  IdContents id = job;
  id.root = l.boundAddr();
  bool unspecified = id.root.ss.ss_family == AF_INET
                         ? reinterpret_cast<sockaddr_in*>(&id.root.ss)->sin_addr.s_addr == htonl(INADDR_ANY)
                         : false;
  if (unspecified) {
    uint16_t port = id.root.port();
    id.root = SockAddr::local();
    id.root.setPort(port);
  }
  auto server = std::make_shared<RootServer>(std::move(l), id, timeoutS);
  std::thread([server] { server->run(); }).detach();
  return id;
}

std::vector<std::vector<uint8_t>> rendezvous(const IdContents& id, int rank, int nranks,
                                             const std::vector<uint8_t>& record, const Deadline& dl) {
  std::string what = "rendezvous root " + id.root.str();
  Socket s = Socket::connect(id.root, dl, what);
  PeerHello me;
  me.jobId = id.jobId;
  me.rank = rank;
  me.nranks = nranks;
  me.service = static_cast<uint32_t>(Service::kRoot);
  clientHandshake(s, id.secret, me, dl, what);
  uint32_t len = static_cast<uint32_t>(record.size());
  s.sendAll(&len, sizeof(len), dl, what);
  s.sendAll(record.data(), record.size(), dl, what);
  ReplyHeader h{};
  s.recvAll(&h, sizeof(h), dl, what + " (waiting for all " + std::to_string(nranks) + " ranks to join)");
  h.msg[sizeof(h.msg) - 1] = 0;
  if (h.status != 0) throwError(hetcclInvalidUsage, what + " refused this rank: " + h.msg);
  if (static_cast<int>(h.nranks) != nranks || h.recordBytes != len)
    throwError(hetcclRemoteError, what + ": reply does not match this rank's request");
  std::vector<std::vector<uint8_t>> out(nranks, std::vector<uint8_t>(len));
  for (int r = 0; r < nranks; ++r) s.recvAll(out[r].data(), len, dl, what);
  return out;
}

}  // namespace hetccl
