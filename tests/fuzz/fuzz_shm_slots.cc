// The shm transport's receive side (ShmTransport::run) reading slots that a
// peer wrote into this rank's ring: the slot header (MsgTag, offset, length,
// flags, single-copy address) is the peer's word, so every field is checked
// before data is copied or reduced. Ranks 0 and 1 are two ShmTransports of
// this process, built once; each input writes up to 4 slots into rank 0's
// ring from rank 1 (ShmTransport::injectSlotsForTest) and runs a batch of
// 1..3 receives / receive-reduces on rank 0.
//
// Slots are raw 64-byte headers from the input, or follow the batch as a
// real sender would (next piece of the current message, or one single-copy
// slot pointing at the message in this process) with one field changed at
// the input's choice.
//
// Oracle: a model of run()'s slot rules (tag and size match the expected
// call; offset is where the message stands; length within the message and
// within a slot, or the whole message for single copy when the ranks use it;
// receive-reduce pieces hold whole elements) says whether the batch
// completes with these slots. run() must succeed exactly then, each receive
// holding the message and each receive-reduce equal to reduceArrays over the
// whole message; otherwise it must throw hetcclInvalidUsage or
// hetcclRemoteError (bad slot, or nothing more arrives within the timeout).
#include <sys/uio.h>

#include <cstdlib>
#include <memory>

#include "elements/host_reduce.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "transport/shm/shm_transport.h"
#include "fuzz_util.h"

using namespace hetccl;
using namespace fuzz;

namespace {

struct Slot {  // SlotHeader of shm_transport.cc
  MsgTag tag;
  uint64_t offset;
  uint64_t len;
  uint64_t cmaAddr;
  uint32_t flags;
  uint32_t pad;
};
static_assert(sizeof(Slot) == 64, "slot header");
constexpr uint32_t kCma = 1;
constexpr int kSlots = 4;

struct Ranks {
  std::unique_ptr<Bootstrap> boot[2];
  std::unique_ptr<Transport> t[2];
  ShmTransport* me = nullptr;
  bool cma = false;
};

Ranks* makeRanks() {
  setenv("HETCCL_SHM_SLOT_BYTES", "4096", 1);
  setenv("HETCCL_SPIN_US", "1000000", 1);  // spin 1 s, the most allowed: the 3 ms timeout below ends a wait first
  auto* r = new Ranks;
  SockAddr lo = SockAddr::parse("127.0.0.1:0");
  IdContents id = startRootServer(lo, newIdContents(lo), 30);
  std::thread other[2];
  for (int rank = 0; rank < 2; ++rank) {
    other[rank] = std::thread([r, rank, &id] {
      r->boot[rank] = std::make_unique<Bootstrap>(id, rank, 2, std::vector<uint8_t>{1}, 30, nullptr);
      TransportContext ctx;
      ctx.rank = rank;
      ctx.nranks = 2;
      ctx.peers = {1 - rank};
      ctx.bootstrap = r->boot[rank].get();
      ctx.timeoutS = 0.003;
      ctx.buffBytes = kSlots * 4096;
      r->t[rank] = createTransport("shm", ctx);
    });
  }
  for (auto& t : other) t.join();
  r->me = dynamic_cast<ShmTransport*>(r->t[0].get());
  FUZZ_CHECK(r->me && r->me->slotBytes() == 4096);
  // Single copy is on when this process may read itself (as the transport probes).
  uint64_t probe = 42, got = 0;
  iovec local{&got, sizeof(got)}, remote{&probe, sizeof(probe)};
  r->cma = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == sizeof(got) && got == probe;
  return r;
}

Ranks& ranks() {
  static Ranks* r = makeRanks();
  return *r;
}

struct Planned {
  Xfer x;
  std::vector<uint8_t> dst, init, message;  // message: what a correct sender sends
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Ranks& R = ranks();
  const size_t slotBytes = R.me->slotBytes();
  Input in(data, size);

  const int nx = 1 + in.byte() % 3;
  std::vector<Planned> plan(nx);
  for (int i = 0; i < nx; ++i) {
    Planned& p = plan[i];
    const bool reduce = in.flag();
    DataType dt = static_cast<DataType>(in.byte() % hetcclNumTypes);
    RedKind rk = static_cast<RedKind>(in.byte() % 4);
    size_t bytes = (in.take<uint16_t>() % 2049) * dataTypeSize(dt);
    MsgTag t;
    t.seq = in.byte();
    t.coll = static_cast<uint16_t>(1 + in.byte() % 9);
    t.count = in.take<uint16_t>();
    t.dtype = static_cast<uint8_t>(dt);
    t.op = static_cast<uint8_t>(rk);
    t.root = -1;
    p.dst.resize(bytes);
    p.message.resize(bytes);
    for (size_t j = 0; j < bytes; ++j) {
      p.dst[j] = static_cast<uint8_t>(j * 13 + i);
      p.message[j] = static_cast<uint8_t>(j * 7 + 3 * i + 1);
    }
    p.init = p.dst;
    p.x = reduce ? Xfer::recvReduce(1, p.dst.data(), bytes, dt, rk, t) : Xfer::recv(1, p.dst.data(), bytes, t);
  }

  // Slots: raw, or a sender's next piece with one field changed.
  const int nslots = in.byte() % (kSlots + 1);
  std::vector<std::vector<uint8_t>> slots;
  size_t cur = 0, curDone = 0;  // where a correct sender stands
  for (int s = 0; s < nslots; ++s) {
    const uint8_t mode = in.byte();
    Slot h{};
    std::vector<uint8_t> body;
    if ((mode & 3) == 0) {
      std::vector<uint8_t> raw = in.bytes(sizeof(Slot));
      if (!raw.empty()) memcpy(&h, raw.data(), raw.size());
      body = in.bytes(in.take<uint16_t>() % (slotBytes + 1));
    } else {
      const Planned& p = plan[std::min(cur, plan.size() - 1)];
      h.tag = p.x.tag;
      h.offset = curDone;
      if ((mode & 3) == 2 && R.cma && curDone == 0) {  // single copy of the whole message
        h.flags = kCma;
        h.len = p.x.bytes;
        h.cmaAddr = reinterpret_cast<uint64_t>(p.message.data());
      } else {
        h.len = std::min(slotBytes, p.x.bytes - std::min(curDone, p.x.bytes));
        body.assign(p.message.begin() + std::min(curDone, p.x.bytes),
                    p.message.begin() + std::min(curDone + h.len, p.x.bytes));
      }
      const uint8_t delta = 1 + in.byte() % 255;
      switch (mode >> 4) {  // mostly unchanged
        case 1: h.tag.seq ^= delta; break;
        case 2: h.tag.bytes += delta; break;
        case 3: h.tag.count ^= delta; break;
        case 4: h.tag.coll ^= delta; break;
        case 5: h.offset += delta; break;
        case 6: h.offset -= delta; break;
        case 7: h.len += delta; break;
        case 8: h.len -= std::min<uint64_t>(h.len, delta); break;
        case 9: h.len = slotBytes + delta; break;
        case 10: h.flags ^= delta; break;
        case 11: h.len ^= uint64_t{1} << (delta % 64); break;
        default: break;
      }
      if (h.len <= slotBytes && h.len > body.size()) body.resize(h.len, 0xcd);
      curDone += h.len;
      if (curDone >= p.x.bytes) cur++, curDone = 0;
    }
    std::vector<uint8_t> slot(sizeof(Slot) + body.size());
    memcpy(slot.data(), &h, sizeof(h));
    if (!body.empty()) memcpy(slot.data() + sizeof(h), body.data(), body.size());
    slot.resize(sizeof(Slot) + slotBytes, 0);  // the ring keeps a whole slot
    slots.push_back(std::move(slot));
  }

  // The model, and what each message must become.
  bool expectOk = true, predictable = true;
  std::vector<std::vector<uint8_t>> received(nx);
  {
    size_t front = 0, done = 0;
    for (const auto& slot : slots) {
      if (front == plan.size()) break;
      const Xfer& x = plan[front].x;
      Slot h;
      memcpy(&h, slot.data(), sizeof(h));
      if (!h.tag.sameCall(x.tag) || h.tag.bytes != x.bytes) {
        expectOk = false;
        break;
      }
      const bool single = h.flags == kCma;
      if (h.offset != done || h.len > x.bytes - done || (single ? (!R.cma || h.len != x.bytes) : h.len > slotBytes)) {
        expectOk = false;
        break;
      }
      if (h.len > 0 && single) {
        if (h.cmaAddr != reinterpret_cast<uint64_t>(plan[front].message.data())) {
          predictable = false;
          break;
        }
        received[front] = plan[front].message;
      } else if (h.len > 0) {
        if (x.kind == Xfer::Kind::kRecvReduce && h.len % dataTypeSize(x.dtype) != 0) {
          expectOk = false;
          break;
        }
        received[front].insert(received[front].end(), slot.begin() + sizeof(Slot), slot.begin() + sizeof(Slot) + h.len);
      }
      done += h.len;
      if (done == x.bytes) front++, done = 0;
    }
    if (front < plan.size()) expectOk = false;
  }

  FUZZ_CHECK(R.me->injectSlotsForTest(1, slots) == slots.size());
  std::vector<Xfer> batch;
  for (const Planned& p : plan) batch.push_back(p.x);
  bool ok = true;
  std::string why;
  try {
    R.me->run(batch);
  } catch (const Error& e) {
    ok = false;
    why = e.what();
    // A single-copy slot naming an address the peer does not map reads as
    // EFAULT: reported as a buffer too small (hetcclInvalidArgument).
    FUZZ_CHECK_MSG(e.code() == hetcclInvalidUsage || e.code() == hetcclRemoteError || e.code() == hetcclInvalidArgument,
                   e.what());
  }
  if (!predictable) {
    note("single-copy slot at a foreign address");
    return 0;
  }
  FUZZ_CHECK_MSG(ok == expectOk, ok ? "completed a batch with bad or missing slots" : why.c_str());
  note(ok ? "completed" : "failed as the model says");
  if (!ok) return 0;
  for (int i = 0; i < nx; ++i) {
    const Planned& p = plan[i];
    const Xfer& x = p.x;
    FUZZ_CHECK(batch[i].done == x.bytes && received[i].size() == x.bytes);
    if (x.bytes == 0) continue;
    if (x.kind == Xfer::Kind::kRecv) {
      FUZZ_CHECK(memcmp(p.dst.data(), received[i].data(), x.bytes) == 0);
    } else {
      std::vector<uint8_t> want(x.bytes);
      reduceArrays(want.data(), p.init.data(), received[i].data(), x.bytes / dataTypeSize(x.dtype), x.dtype, x.redKind);
      FUZZ_CHECK(memcmp(p.dst.data(), want.data(), x.bytes) == 0);
    }
  }
  return 0;
}
