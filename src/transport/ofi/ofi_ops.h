// Private to the ofi transport: its wire constants, the operations one run()
// drives (Op), the RMA path's per-transfer state (Rma) and the run's
// bookkeeping (Run).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include <rdma/fi_domain.h>

#include "secure/record.h"
#include "transport/ofi/ofi_transport.h"
#include "transport/sealed_links.h"

namespace hetccl {
namespace ofi {

// Tag parts: 0 the header, 1..kMaxParts payload parts, then the RMA path's
// offer (receiver to sender) and finish (sender to receiver). Payload parts
// are at most this many bytes each unless the message needs larger ones.
constexpr uint32_t kMaxParts = 65533;
constexpr uint32_t kOfferPart = 0xFFFE;
constexpr uint32_t kFinPart = 0xFFFF;
constexpr size_t kPartBytes = size_t{4} << 20;
// Receive slots (receive-reduce parts, encrypted parts), and as many send
// slots where a link is encrypted.
constexpr int kStagingSlots = 4;
// Receive buffers kept registered for remote writes (ofi_mr_cache.h).
constexpr size_t kRemoteMrs = 64;
// A header sealed as one record.
constexpr size_t kSealedHeader = sizeof(MsgTag) + secure::kRecordOverhead;
constexpr const char* kFailedAuth = kSealedFailedAuth;

// The 48-bit tag of part `part` of message `msg` (directed receives tell senders apart).
inline uint64_t makeTag(uint64_t msg, uint32_t part) { return ((msg & 0xFFFFFFFFu) << 16) | part; }

// Parts of a message of `bytes`: at most kMaxParts of `unit` bytes or more,
// each a multiple of 8 bytes but the last.
inline size_t partBytesFor(size_t bytes, size_t unit) {
  size_t p = std::max(unit, (bytes + kMaxParts - 1) / kMaxParts);
  return (p + 7) & ~size_t{7};
}

// The receiver's offer (the RMA path): write the payload at addr (an
// address, or an offset into the registration where the provider has no
// FI_MR_VIRT_ADDR) with key, or send it in tagged parts (a receive-reduce
// folds them from staging), or refused (the receiver is in another call).
enum : uint64_t { kOfferWrite = 1, kOfferParts = 2, kOfferRefused = 3 };
struct Offer {
  uint64_t mode = 0;
  uint64_t addr = 0;
  uint64_t len = 0;
  uint64_t key = 0;
};

}  // namespace ofi

struct OfiTransport::Op {
  // First: libfabric writes its per-operation state here, and hands the
  // operation's address back as the completion's op_context.
  fi_context2 ctx{};
  // The RMA path: the receiver sends kOfferSend and waits on kFinRecv; the
  // sender waits on kOfferRecv, then writes (kWrite) and sends kFinSend.
  enum Kind { kHeaderSend, kHeaderRecv, kPartSend, kPartRecv, kOfferSend, kOfferRecv, kWrite, kFinSend, kFinRecv };
  Kind kind = kHeaderSend;
  Xfer* x = nullptr;
  uint64_t tag = 0;
  void* buf = nullptr;
  size_t len = 0;    // bytes on the wire
  size_t plain = 0;  // payload bytes of a part (len less the records' framing on an encrypted link)
  size_t off = 0;    // payload offset of a part
  int slot = -1;     // staging slot of a receive-reduce part or of an encrypted part
  bool posted = false, done = false;
  MsgTag* header = nullptr;         // kHeaderSend / kHeaderRecv
  uint8_t* sealedHeader = nullptr;  // kHeaderRecv on an encrypted link: the header as received
  uint64_t msg = 0;
  bool sends() const {
    return kind == kHeaderSend || kind == kPartSend || kind == kOfferSend || kind == kWrite || kind == kFinSend;
  }
};

// One transfer's RMA path (where OfiTransport::offered): the offer and the
// finish as sent or received, and the sender's writes still in flight.
struct OfiTransport::Rma {
  ofi::Offer offer;
  uint64_t fin = 0;  // the finish message's body: the bytes written
  size_t writesLeft = 0;
};

// One run(): its transfers and operations. ops is reserved up front
// (headers first, parts appended as headers complete): their addresses stay
// put, as libfabric holds them until they complete.
struct OfiTransport::Run {
  std::span<Xfer> xfers;
  std::vector<Op> ops;
  size_t doneOps = 0;
  std::vector<MsgTag> headers;
  std::vector<Rma> rma;  // by transfer (registered at once where FI_MR_LOCAL asks)
  std::vector<std::array<uint8_t, ofi::kSealedHeader>> sealedHeaders;
  std::deque<size_t> backlog;   // ops the provider had no room for (-FI_EAGAIN), in order
  std::deque<size_t> waitSlot;  // receive-reduce and encrypted receive parts waiting for a receive slot
  std::deque<size_t> waitSend;  // encrypted send parts waiting for a send slot
  std::vector<int> freeSlots, freeSendSlots;
  // This run's registrations (FI_MR_LOCAL): [begin, end) and the region.
  std::vector<std::pair<std::pair<uintptr_t, uintptr_t>, fid_mr*>> regs;
  explicit Run(std::span<Xfer> x) : xfers(x), headers(x.size()), rma(x.size()) {}
  ~Run() {
    for (auto& [range, mr] : regs) fi_close(&mr->fid);
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
};

}  // namespace hetccl
