// The rendezvous root's state and per-connection admission (see root.h).
// Internal to the bootstrap; in a header only so that tests can drive one
// connection's admission on their own thread (tests/fuzz/fuzz_root.cc).
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "bootstrap/auth.h"
#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl::rootimpl {

struct ReplyHeader {
  int32_t status;  // 0: table follows; otherwise msg says why
  uint32_t nranks;
  uint32_t recordBytes;
  uint32_t reserved;
  char msg[480];
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
      Socket s = listener_.accept(100, &admitted_);
      if (!s.valid()) continue;
      // Each connection is vetted on its own thread so a silent or hostile
      // client cannot stall the others.
      helpers.emplace_back([this, sock = std::move(s)]() mutable {
        admit(std::move(sock));
        admitted_.notify();  // the last rank may be in: reply at once
      });
    }
    // Reply before joining the helpers: one still vetting a silent or slow
    // stray client must not hold up the job (arrived_ no longer changes once
    // every rank is in). Then the stragglers give up at once.
    const bool complete = done();
    if (complete && !failed_) reply();
    stop_.store(true);
    for (auto& t : helpers) t.join();
    if (!complete)
      LOG_WARN(kBootstrap, "rendezvous root %s: gave up after the timeout with %zu of %d ranks", id_.root.str().c_str(),
               arrived_.size(), nranks_);
  }

  // run()'s steps, public for tests: whether every rank arrived, refusing,
  // one connection's admission (run() gives each its own thread), the reply.
  // Every rank came: with its record, or (failed_) to be told of a failure.
  bool done() {
    std::lock_guard<std::mutex> g(mu_);
    return nranks_ > 0 && static_cast<int>(seen_.size()) == nranks_;
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
      Deadline dl = Deadline::in(10, &stop_);
      PeerHello hello = serverHandshake(s, id_.secret, id_.jobId, Service::kRoot, dl);
      uint32_t len = 0;
      s.recvAll(&len, sizeof(len), dl, "rendezvous record size");
      if (len & kFailedRecord) return admitFailure(std::move(s), hello, len & ~kFailedRecord, dl);
      if (len == 0 || len > kMaxRecordBytes) return refuse(s, "record size " + std::to_string(len) + " out of range");
      std::vector<uint8_t> rec(len);
      s.recvAll(rec.data(), len, dl, "rendezvous record");
      std::lock_guard<std::mutex> g(mu_);
      if (failed_) {  // a rank failed before it could join: tell every later one
        if (hello.rank >= 0 && hello.rank < nranks_) seen_.insert(hello.rank);
        return refuse(s, failure_);
      }
      // Check everything before anything is committed: a refused client
      // must not decide what the ranks after it are held to.
      if (hello.nranks <= 0 || hello.nranks > kMaxRanks)
        return refuse(s, "nranks " + std::to_string(hello.nranks) + " out of range");
      if (nranks_ != 0 && hello.nranks != nranks_)
        return refuse(s, "rank " + std::to_string(hello.rank) + " says nranks=" + std::to_string(hello.nranks) +
                             " but another rank said " + std::to_string(nranks_));
      if (hello.rank < 0 || hello.rank >= hello.nranks)
        return refuse(s, "rank " + std::to_string(hello.rank) + " out of range");
      if (recordBytes_ != 0 && len != recordBytes_)
        return refuse(s, "record size differs between ranks (mixed library versions?)");
      if (seen_.count(hello.rank)) return refuse(s, "rank " + std::to_string(hello.rank) + " joined twice");
      nranks_ = hello.nranks;
      recordBytes_ = len;
      seen_.insert(hello.rank);
      arrived_.push_back(Arrival{std::move(s), hello.rank, std::move(rec)});
    } catch (const Error& e) {
      LOG_INFO(kBootstrap, "rendezvous root: dropped a connection: %s", e.what());
    }
  }

  // A rank that failed before it could join (reportInitFailure): every rank
  // that arrived is refused with its message, and so is every later one.
  void admitFailure(Socket s, const PeerHello& hello, uint32_t msgLen, const Deadline& dl) {
    if (msgLen > kMaxFailureBytes) return refuse(s, "failure report too long");
    std::string why(msgLen, '\0');
    s.recvAll(why.data(), msgLen, dl, "failure report");
    std::lock_guard<std::mutex> g(mu_);
    if (hello.nranks <= 0 || hello.nranks > kMaxRanks || hello.rank < 0 || hello.rank >= hello.nranks ||
        (nranks_ != 0 && hello.nranks != nranks_))
      return refuse(s, "failure report of a rank outside this job");
    nranks_ = hello.nranks;
    seen_.insert(hello.rank);
    if (!failed_) {
      failed_ = true;
      failure_ = "rank " + std::to_string(hello.rank) + " could not initialise: " + why;
      LOG_WARN(kBootstrap, "rendezvous root: %s", failure_.c_str());
      for (const auto& a : arrived_) refuse(a.sock, failure_);
      arrived_.clear();
    }
    refuse(s, failure_);
  }

  void reply() {
    std::vector<uint8_t> table(static_cast<size_t>(nranks_) * recordBytes_);
    for (const auto& a : arrived_)
      memcpy(table.data() + static_cast<size_t>(a.rank) * recordBytes_, a.record.data(), recordBytes_);
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

 private:
  Socket listener_;
  IdContents id_;
  Deadline deadline_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};  // run() is done: helpers stop vetting
  Waker admitted_;                 // a helper finished admitting a connection
  int nranks_ = 0;
  uint32_t recordBytes_ = 0;
  std::vector<Arrival> arrived_;
  std::set<int> seen_;   // ranks that came, with a record or a failure
  bool failed_ = false;  // a rank reported a failure: everyone is refused
  std::string failure_;
};

}  // namespace hetccl::rootimpl
