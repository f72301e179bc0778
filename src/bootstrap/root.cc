#include "bootstrap/root.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "bootstrap/root_server.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

using rootimpl::ReplyHeader;
using rootimpl::RootServer;

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

void startRootServerOn(Socket listener, const IdContents& job, double timeoutS) {
  auto server = std::make_shared<RootServer>(std::move(listener), job, timeoutS);
  std::thread([server] { server->run(); }).detach();
}

void reportInitFailure(const IdContents& id, int rank, int nranks, const std::string& why, double timeoutS) {
  try {
    Deadline dl = Deadline::in(std::min(timeoutS, 10.0));
    std::string what = "rendezvous root " + id.root.str();
    Socket s = Socket::connect(id.root, dl, what);
    PeerHello me;
    me.jobId = id.jobId;
    me.rank = rank;
    me.nranks = nranks;
    me.service = static_cast<uint32_t>(Service::kRoot);
    clientHandshake(s, id.secret, me, dl, what);
    std::string msg = why.substr(0, kMaxFailureBytes);
    uint32_t len = kFailedRecord | static_cast<uint32_t>(msg.size());
    s.sendAll(&len, sizeof(len), dl, what);
    s.sendAll(msg.data(), msg.size(), dl, what);
    ReplyHeader h{};
    s.recvAll(&h, sizeof(h), dl, what);  // the root's acknowledgement (a refusal)
  } catch (const Error& e) {
    LOG_INFO(kBootstrap, "rank %d: could not report its init failure to the rendezvous root: %s", rank, e.what());
  }
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
