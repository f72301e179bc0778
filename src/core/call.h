// The vocabulary of one collective call as every layer names it: its kind,
// and its tag, which every message of the call carries (the receiver checks
// it against its own, so ranks in different calls fail naming both).
#pragma once

#include <cstdint>
#include <string>

namespace hetccl {

enum class CollKind : uint16_t {
  kAllReduce = 1,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,
};
const char* collKindName(CollKind k);
// MsgTag::coll of the device border relay's messages (border/border_relay.h):
// not a collective of the API; MsgTag::op then says which message.
inline constexpr uint16_t kDeviceBorderRelay = 0x100;
// ... and of the send/recv relay's (border/pair_relay.h): op 0 a status, 1 parts.
inline constexpr uint16_t kPairRelay = 0x101;

struct MsgTag {
  uint64_t seq = 0;    // collective sequence number on the communicator
  uint64_t count = 0;  // the collective's count argument
  uint64_t bytes = 0;  // this message's payload bytes
  uint16_t coll = 0;   // CollKind
  uint8_t dtype = 0;
  uint8_t op = 0;     // RedKind or 0
  int32_t root = -1;  // root/peer argument, or -1

  bool sameCall(const MsgTag& o) const {
    return seq == o.seq && count == o.count && coll == o.coll && dtype == o.dtype && op == o.op && root == o.root;
  }
  std::string describe() const;  // "AllReduce #12 (count 1000, float, sum)"
};
static_assert(sizeof(MsgTag) == 32, "MsgTag is a wire format");

}  // namespace hetccl
