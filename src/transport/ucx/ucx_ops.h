// Private to the ucx transport: its wire constants, the requests one run()
// drives (Op) and the RMA path's per-transfer state (Rma).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/ucx/ucx_transport.h"

namespace hetccl {
namespace ucx {

constexpr uint64_t kFullMask = ~uint64_t{0};
// Tag parts: 0 the header, 1..kMaxParts payload parts, then the RMA path's
// offer (receiver to sender) and finish (sender to receiver).
constexpr uint32_t kMaxParts = 65533;
constexpr uint32_t kRtrPart = 0xFFFE;
constexpr uint32_t kFinPart = 0xFFFF;

inline uint64_t makeTag(int sender, uint32_t msg, uint32_t part) {
  return (static_cast<uint64_t>(sender) << 48) | (static_cast<uint64_t>(msg) << 16) | part;
}

// The receiver's offer: put the payload here (then the packed rkey), send
// it in parts (a receive-reduce folds them from staging), or refused.
enum : uint32_t { kOfferPut = 0, kOfferRefused = 1, kOfferParts = 2 };
struct OfferHead {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint32_t rkeyLen = 0;
  uint32_t mode = kOfferPut;
};
constexpr size_t kOfferBytes = 4096;  // offer messages are at most this long

}  // namespace ucx

struct UcxTransport::Op {
  // kRtrRecv on a sender becomes kPut, kFlush, kFinSend in turn (acceptOffer).
  enum Kind { kHeaderSend, kHeaderRecv, kPartSend, kPartRecv, kRtrSend, kRtrRecv, kPut, kFlush, kFinSend, kFinRecv };
  Kind kind = kHeaderSend;
  Xfer* x = nullptr;
  uint64_t tag = 0;
  void* buf = nullptr;
  size_t len = 0;
  size_t off = 0;  // payload offset of a part
  int slot = -1;   // staging slot of a receive-reduce part
  void* req = nullptr;
  bool posted = false, done = false;
  MsgTag* header = nullptr;  // kHeaderSend / kHeaderRecv
  uint32_t msg = 0;
  Rma* rma = nullptr;  // RMA path ops
  bool sends() const { return kind != kHeaderRecv && kind != kPartRecv && kind != kRtrRecv && kind != kFinRecv; }
};

struct UcxTransport::Rma {
  const ucx::UcxApi* api = nullptr;
  ucp_context_h context = nullptr;
  std::vector<uint8_t> wire;  // the offer, sent or received (kOfferBytes once used)
  ucp_mem_h memh = nullptr;   // receiver: its registered buffer
  void* packed = nullptr;     // receiver: packed rkey (in wire too)
  ucp_rkey_h rkey = nullptr;  // sender: the receiver's unpacked rkey
  uint64_t remoteAddr = 0;
  uint64_t fin = 0;          // the finish message's body
  bool partsWanted = false;  // sender: the offer asked for parts
  bool partsAdded = false;
  Rma() = default;
  Rma(const Rma&) = delete;
  Rma& operator=(const Rma&) = delete;
  ~Rma() {
    if (rkey) api->rkeyDestroy(rkey);
    if (packed) api->rkeyBufferRelease(packed);
    if (memh) api->memUnmap(context, memh);
  }
};

}  // namespace hetccl
