// Private to the ucx transport: its wire constants, the requests one run()
// drives (Op) and the RMA path's per-transfer state (Rma).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "secure/record.h"
#include "transport/ucx/ucx_transport.h"
#include "transport/sealed_links.h"

namespace hetccl {
namespace ucx {

constexpr uint64_t kFullMask = ~uint64_t{0};
// Payload parts (larger only for messages of more than kMaxParts of these).
constexpr size_t kPartBytes = size_t{4} << 20;
// Receive slots (receive-reduce parts, encrypted parts), and as many send
// slots where a link is encrypted.
constexpr int kStagingSlots = 4;
// A staging slot: a part, sealed or not.
constexpr size_t kSlotBytes = kPartBytes + (kPartBytes / secure::kMaxRecordPlain + 1) * secure::kRecordOverhead;
// A header sealed as one record.
constexpr size_t kSealedHeader = sizeof(MsgTag) + secure::kRecordOverhead;
constexpr const char* kFailedAuth = kSealedFailedAuth;
// Tag parts: 0 the header, 1..kMaxParts payload parts, then the RMA path's
// offer (receiver to sender) and finish (sender to receiver).
constexpr uint32_t kMaxParts = 65533;
constexpr uint32_t kRtrPart = 0xFFFE;
constexpr uint32_t kFinPart = 0xFFFF;

// Parts of a message: at most kMaxParts, each a multiple of 8 bytes but the last.
inline size_t partBytes(size_t bytes) {
  size_t p = std::max(kPartBytes, (bytes + kMaxParts - 1) / kMaxParts);
  return (p + 7) & ~size_t{7};
}

inline uint64_t makeTag(int sender, uint64_t msg, uint32_t part) {
  return (static_cast<uint64_t>(sender) << 48) | ((msg & 0xFFFFFFFFu) << 16) | part;
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
  size_t len = 0;    // bytes on the wire
  size_t plain = 0;  // payload bytes of a part (len less the records' framing on an encrypted link)
  size_t off = 0;    // payload offset of a part
  int slot = -1;     // staging slot of a receive-reduce part or of an encrypted part
  void* req = nullptr;
  bool posted = false, done = false;
  MsgTag* header = nullptr;         // kHeaderSend / kHeaderRecv
  uint8_t* sealedHeader = nullptr;  // kHeaderRecv on an encrypted link: the header as received
  uint64_t msg = 0;                 // the message's number (its low 32 bits are in the tag)
  Rma* rma = nullptr;               // RMA path ops
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

// One run(): its transfers and the requests it drives. ops is reserved up
// front (headers first, parts appended as headers complete): their
// addresses stay put.
struct UcxTransport::Run {
  std::span<Xfer> xfers;
  std::vector<Op> ops;
  std::vector<Rma> rma;  // by transfer: registrations and rkeys of the RMA path, released on return
  std::vector<MsgTag> headers;
  std::vector<std::array<uint8_t, ucx::kSealedHeader>> sealedHeaders;
  std::deque<size_t> waitSlot;  // receive-reduce and encrypted receive parts waiting for a receive slot
  std::deque<size_t> waitSend;  // encrypted send parts waiting for a send slot
  std::vector<int> freeSlots, freeSendSlots;
  explicit Run(std::span<Xfer> x) : xfers(x), rma(x.size()), headers(x.size()) {}
};

}  // namespace hetccl
