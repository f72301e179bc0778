#include "transport/transport.h"

#include <cstdio>

#include "core/error.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace hetccl {

const char* collKindName(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return "AllReduce";
    case CollKind::kBroadcast: return "Broadcast";
    case CollKind::kReduce: return "Reduce";
    case CollKind::kAllGather: return "AllGather";
    case CollKind::kReduceScatter: return "ReduceScatter";
    case CollKind::kAlltoAll: return "AlltoAll";
    case CollKind::kGather: return "Gather";
    case CollKind::kScatter: return "Scatter";
    case CollKind::kSendRecv: return "Send/Recv";
  }
  return "unknown collective";
}

std::string MsgTag::describe() const {
  char buf[160];
  const char* dt = dataTypeValid(dtype) ? dataTypeName(static_cast<DataType>(dtype)) : "?";
  const char* opName = op < 4 ? redKindName(static_cast<RedKind>(op)) : "?";
  int n = snprintf(buf, sizeof(buf), "%s #%llu (count %llu, %s", collKindName(static_cast<CollKind>(coll)),
                   static_cast<unsigned long long>(seq), static_cast<unsigned long long>(count), dt);
  CollKind k = static_cast<CollKind>(coll);
  if (k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter)
    n += snprintf(buf + n, sizeof(buf) - n, ", %s", opName);
  if (root >= 0) n += snprintf(buf + n, sizeof(buf) - n, ", %s %d", k == CollKind::kSendRecv ? "peer" : "root", root);
  snprintf(buf + n, sizeof(buf) - n, ")");
  return buf;
}

Xfer Xfer::send(int peer, const void* src, size_t bytes, const MsgTag& t) {
  Xfer x;
  x.kind = Kind::kSend;
  x.peer = peer;
  x.src = src;
  x.bytes = bytes;
  x.tag = t;
  x.tag.bytes = bytes;
  return x;
}

Xfer Xfer::recv(int peer, void* dst, size_t bytes, const MsgTag& t) {
  Xfer x;
  x.kind = Kind::kRecv;
  x.peer = peer;
  x.dst = dst;
  x.bytes = bytes;
  x.tag = t;
  x.tag.bytes = bytes;
  return x;
}

Xfer Xfer::recvReduce(int peer, void* dst, size_t bytes, DataType dt, RedKind k, const MsgTag& t) {
  Xfer x = recv(peer, dst, bytes, t);
  x.kind = Kind::kRecvReduce;
  x.dtype = dt;
  x.redKind = k;
  return x;
}

std::vector<std::string> transportNames() { return {"tcp", "shm"}; }

std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx) {
  if (name == "tcp") return std::make_unique<TcpTransport>(ctx);
  if (name == "shm") return std::make_unique<ShmTransport>(ctx);
  throwError(hetcclInvalidArgument, "unknown transport '" + name + "' (known: tcp, shm)");
}

}  // namespace hetccl
