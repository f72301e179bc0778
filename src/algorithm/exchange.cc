// Pairwise exchanges: AlltoAll, Gather, Scatter and point-to-point, where
// every block moves once, straight from the rank that holds it to the rank
// that reads it. Pairs inside one group use the backend's send/recv (one
// backend group call), pairs across groups the transport (one batch).
#include <cstring>
#include <vector>

#include "algorithm/coll.h"
#include "algorithm/self_exchange.h"
#include "core/bytes.h"
#include "comm/comm.h"
#include "observe/observed.h"
#include "core/error.h"

namespace hetccl {
namespace {

struct Exchange {
  std::vector<CollArgs> ops;  // kind kSendRecv: isSend -> send to peer, else receive from it
};

void addSend(Exchange& e, const void* buf, size_t count, DataType dt, int peer) {
  CollArgs a;
  a.kind = CollKind::kSendRecv;
  a.send = buf;
  a.isSend = true;
  a.count = count;
  a.dt = dt;
  a.peer = peer;
  e.ops.push_back(a);
}

void addRecv(Exchange& e, void* buf, size_t count, DataType dt, int peer) {
  CollArgs a;
  a.kind = CollKind::kSendRecv;
  a.recv = buf;
  a.count = count;
  a.dt = dt;
  a.peer = peer;
  e.ops.push_back(a);
}

// Runs sends and receives of one collective call; they all carry its tag.
void runExchange(const PlanContext& p, const std::vector<CollArgs>& ops, bool collectiveTags) {
  Comm& c = p.comm;
  const Topology& t = c.topo();
  const int g = c.myGroup();
  std::vector<Xfer> cross;
  Backend& be = p.backend;
  std::vector<SelfSide> selfSend, selfRecv;
  for (const CollArgs& op : ops)
    if (op.peer == c.rank())
      (op.isSend ? selfSend : selfRecv)
          .push_back({op.isSend ? const_cast<void*>(op.send) : op.recv, op.count * dataTypeSize(op.dt)});
  if (!selfSend.empty() || !selfRecv.empty()) noteLocalWork();
  if (std::string why = copySelfExchanges(selfSend, selfRecv); !why.empty()) throwRefused(hetcclInvalidUsage, why);
  bool any = false;
  for (const CollArgs& op : ops)
    if (t.groupOf[op.peer] == g && op.peer != c.rank()) any = true;
  if (any) be.groupStart();
  for (const CollArgs& op : ops) {
    if (op.peer == c.rank()) continue;
    const size_t bytes = op.count * dataTypeSize(op.dt);
    MsgTag tag = p.tag;
    if (!collectiveTags) {
      // Point-to-point: matched per ordered pair by a per-peer counter.
      tag = MsgTag{};
      tag.coll = static_cast<uint16_t>(CollKind::kSendRecv);
      tag.seq = op.isSend ? c.nextSendSeq(op.peer) : c.nextRecvSeq(op.peer);
      tag.count = op.count;
      tag.dtype = static_cast<uint8_t>(op.dt);
    }
    if (t.groupOf[op.peer] == g) {
      c.callTag() = tag;
      int peer = t.groupRank[op.peer];
      if (op.isSend)
        be.send(op.send, op.count, op.dt, peer, op.stream);
      else
        be.recv(op.recv, op.count, op.dt, peer, op.stream);
    } else if (op.isSend) {
      cross.push_back(Xfer::send(op.peer, op.send, bytes, tag));
    } else {
      cross.push_back(Xfer::recv(op.peer, op.recv, bytes, tag));
    }
  }
  if (any) be.groupEnd();
  if (!cross.empty()) c.transport().run(cross);
}

}  // namespace

std::vector<CollArgs> pointToPointParts(const CollArgs& a, int nranks, int rank) {
  const size_t bytes = a.count * dataTypeSize(a.dt);
  const auto* in = static_cast<const uint8_t*>(a.send);
  auto* out = static_cast<uint8_t*>(a.recv);
  Exchange e;
  switch (a.kind) {
    case CollKind::kAlltoAll:
      for (int j = 0; j < nranks; ++j) {  // from this rank on, so that no rank is everyone's first
        const int to = (rank + j) % nranks, from = (rank - j + nranks) % nranks;
        addSend(e, in + to * bytes, a.count, a.dt, to);
        addRecv(e, out + from * bytes, a.count, a.dt, from);
      }
      break;
    case CollKind::kGather:
      addSend(e, a.send, a.count, a.dt, a.root);
      if (rank == a.root)
        for (int r = 0; r < nranks; ++r) addRecv(e, out + r * bytes, a.count, a.dt, r);
      break;
    case CollKind::kScatter:
      if (rank == a.root)
        for (int r = 0; r < nranks; ++r) addSend(e, in + r * bytes, a.count, a.dt, r);
      addRecv(e, a.recv, a.count, a.dt, a.root);
      break;
    default: throwError(hetcclInternalError, std::string("no point-to-point parts of ") + collKindName(a.kind));
  }
  return e.ops;
}

void runAlltoAll(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const size_t total = a.count * dataTypeSize(a.dt) * static_cast<size_t>(c.nranks());
  CollArgs b = a;
  std::vector<uint8_t> copy;
  if (a.send == a.recv && c.nranks() > 1) {  // in place: keep the input intact while blocks arrive
    const auto* in = static_cast<const uint8_t*>(a.send);
    copy.assign(in, in + total);
    b.send = copy.data();
  }
  runExchange(p, pointToPointParts(b, c.nranks(), c.rank()), true);
}

void runGather(const PlanContext& p, const CollArgs& a) {
  runExchange(p, pointToPointParts(a, p.comm.nranks(), p.comm.rank()), true);
}

void runScatter(const PlanContext& p, const CollArgs& a) {
  runExchange(p, pointToPointParts(a, p.comm.nranks(), p.comm.rank()), true);
}

void runPointToPoint(const PlanContext& p, const CollArgs* ops, size_t n) {
  std::vector<CollArgs> v(ops, ops + n);
  runExchange(p, v, false);
}

}  // namespace hetccl
