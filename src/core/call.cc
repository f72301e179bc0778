#include "core/call.h"

#include <cstdio>

#include "core/datatype.h"

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
  if (coll == kDeviceBorderRelay) {
    static const char* const kWhat[] = {"request", "parts", "results", "acknowledgement"};
    snprintf(buf, sizeof(buf), "device border relay #%llu (%s)", static_cast<unsigned long long>(seq),
             op < 4 ? kWhat[op] : "?");
    return buf;
  }
  if (coll == kPairRelay) {
    snprintf(buf, sizeof(buf), "send/recv relay round %llu (%s)", static_cast<unsigned long long>(seq),
             op == 0 ? "status" : "parts");
    return buf;
  }
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

}  // namespace hetccl
