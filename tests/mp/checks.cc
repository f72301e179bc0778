#include "checks.h"

#include <cstring>

namespace hmp {
namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA7;  // around every buffer: must survive the call
constexpr uint8_t kStaleByte = 0xEE;  // output buffers start with this

// A buffer with guard bytes on both sides; data() is never null, even for
// 0 bytes.
class Buf {
 public:
  explicit Buf(size_t bytes) : bytes_(bytes), mem_(bytes + 2 * kGuard, kStaleByte) {
    memset(mem_.data(), kGuardByte, kGuard);
    memset(mem_.data() + kGuard + bytes, kGuardByte, kGuard);
  }
  uint8_t* data() { return mem_.data() + kGuard; }
  std::vector<uint8_t> copy() const { return {mem_.begin() + kGuard, mem_.begin() + kGuard + bytes_}; }
  void expectGuards(const std::string& what) const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (mem_[i] != kGuardByte || mem_[kGuard + bytes_ + i] != kGuardByte) {
        ADD_FAILURE() << what << ": the call wrote outside the buffer (guard bytes changed)";
        return;
      }
    }
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> mem_;
};

// The pattern of `rank` at [offset, offset+bytes).
std::vector<uint8_t> pattern(uint64_t seed, int rank, size_t offset, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  fillBytes(seed, rank, offset, v.data(), bytes);
  return v;
}

// Results that are identical on every rank (AllReduce, Broadcast,
// AllGather) are compared with the reference on every rank up to this many
// elements; above it on one rank only (the check's root), and every rank's
// result hash must equal that rank's (Rank::reportSame), which is as strict
// and saves computing a large reference on every rank.
constexpr size_t kVerifyEverywhereMax = 65536;

bool verifyHere(const Check& c, int rank) { return c.count <= kVerifyEverywhereMax || rank == c.root; }

}  // namespace

Checker::Checker(const Rank& r) : r_(r) {}

Checker::~Checker() {
  for (const auto& [dt, op] : preMul_) HC_EXPECT_OK(hetcclRedOpDestroy(op, r_.comm), r_.comm);
}

hetcclRedOp_t Checker::redOp(Op op, hetcclDataType_t dt) {
  switch (op) {
    case Op::kSum: return hetcclSum;
    case Op::kProd: return hetcclProd;
    case Op::kMax: return hetcclMax;
    case Op::kMin: return hetcclMin;
    case Op::kAvg: return hetcclAvg;
    case Op::kPreMulSum: break;
  }
  auto it = preMul_.find(dt);
  if (it != preMul_.end()) return it->second;
  uint8_t scalar[8];
  ref::storeElem(dt, scalar, preMulScalar(dt));  // the scalar is of the op's data type
  hetcclRedOp_t created;
  HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&created, scalar, dt, hetcclScalarHostImmediate, r_.comm), r_.comm);
  preMul_[dt] = created;
  return created;
}

void Checker::run(const Check& c) {
  r_.progress(c.label());
  switch (c.coll) {
    case Coll::kAllReduce: return allReduce(c);
    case Coll::kBroadcast: return broadcast(c);
    case Coll::kReduce: return reduce(c);
    case Coll::kAllGather: return allGather(c);
    case Coll::kReduceScatter: return reduceScatter(c);
    case Coll::kAlltoAll: return alltoAll(c);
    case Coll::kGather: return gather(c);
    case Coll::kScatter: return scatter(c);
    case Coll::kSendRecv: return sendRecv(c);
  }
}

void Checker::allReduce(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  Buf in(bytes), out(bytes);
  fillInput(c, r_.rank, 0, c.count, in.data());
  const std::vector<uint8_t> orig = in.copy();
  void* recv = c.inPlace ? in.data() : out.data();
  HC_ASSERT_OK(hetcclAllReduce(in.data(), recv, c.count, c.dt, redOp(c.op, c.dt), r_.comm, nullptr), r_.comm);
  if (verifyHere(c, r_.rank)) expectReduced(c, recv, reduceExpected(c, r_.nranks, 0, c.count), "result");
  if (!c.inPlace) expectBytes(c.dt, in.data(), orig.data(), bytes, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
  // Every rank must hold the same bits (also where floats round).
  r_.reportSame(c.label() + " result hash", hashBytes(recv, bytes));
}

void Checker::broadcast(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const bool root = r_.rank == c.root;
  Buf in(bytes), out(bytes);
  if (root) fillBytes(c.seed, c.root, 0, in.data(), bytes);
  void* recv = c.inPlace && root ? in.data() : out.data();
  const void* send = c.inPlace ? recv : root ? in.data() : nullptr;  // sendbuff is only read on the root
  HC_ASSERT_OK(hetcclBroadcast(send, recv, c.count, c.dt, c.root, r_.comm, nullptr), r_.comm);
  if (verifyHere(c, r_.rank))
    expectBytes(c.dt, recv, pattern(c.seed, c.root, 0, bytes).data(), bytes, c.label() + ": result");
  r_.reportSame(c.label() + " result hash", hashBytes(recv, bytes));
  if (root && !c.inPlace)
    expectBytes(c.dt, in.data(), pattern(c.seed, c.root, 0, bytes).data(), bytes, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::reduce(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const bool root = r_.rank == c.root;
  Buf in(bytes), out(bytes);
  fillInput(c, r_.rank, 0, c.count, in.data());
  const std::vector<uint8_t> orig = in.copy();
  void* recv = c.inPlace ? in.data() : root ? out.data() : nullptr;  // recvbuff is only written on the root
  HC_ASSERT_OK(hetcclReduce(in.data(), recv, c.count, c.dt, redOp(c.op, c.dt), c.root, r_.comm, nullptr), r_.comm);
  if (root) expectReduced(c, recv, reduceExpected(c, r_.nranks, 0, c.count), "result at the root");
  // A non-root's buffer is only a sendbuff, in place or not.
  if (!root || !c.inPlace) expectBytes(c.dt, in.data(), orig.data(), bytes, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::allGather(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  Buf in(bytes), out(bytes * n);
  fillBytes(c.seed, me, 0, in.data(), bytes);
  const void* send = in.data();
  if (c.inPlace) {
    fillBytes(c.seed, me, 0, out.data() + me * bytes, bytes);
    send = out.data() + me * bytes;
  }
  HC_ASSERT_OK(hetcclAllGather(send, out.data(), c.count, c.dt, r_.comm, nullptr), r_.comm);
  if (verifyHere(c, me)) {
    std::vector<uint8_t> want(bytes * n);
    for (int r = 0; r < n; ++r) fillBytes(c.seed, r, 0, want.data() + r * bytes, bytes);
    expectBytes(c.dt, out.data(), want.data(), want.size(), c.label() + ": result");
  }
  if (!c.inPlace)
    expectBytes(c.dt, in.data(), pattern(c.seed, me, 0, bytes).data(), bytes, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
  r_.reportSame(c.label() + " result hash", hashBytes(out.data(), bytes * n));
}

void Checker::reduceScatter(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  Buf in(bytes * n), out(bytes);
  fillInput(c, me, 0, c.count * n, in.data());
  const std::vector<uint8_t> orig = in.copy();
  void* recv = c.inPlace ? in.data() + me * bytes : out.data();
  HC_ASSERT_OK(hetcclReduceScatter(in.data(), recv, c.count, c.dt, redOp(c.op, c.dt), r_.comm, nullptr), r_.comm);
  expectReduced(c, recv, reduceExpected(c, n, me * c.count, c.count), "result");
  if (!c.inPlace) expectBytes(c.dt, in.data(), orig.data(), orig.size(), c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::alltoAll(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  Buf in(bytes * n), out(bytes * n);
  fillBytes(c.seed, me, 0, in.data(), bytes * n);  // block j goes to rank j
  void* recv = c.inPlace ? in.data() : out.data();
  HC_ASSERT_OK(hetcclAlltoAll(in.data(), recv, c.count, c.dt, r_.comm, nullptr), r_.comm);
  std::vector<uint8_t> want(bytes * n);
  for (int r = 0; r < n; ++r) fillBytes(c.seed, r, me * bytes, want.data() + r * bytes, bytes);
  expectBytes(c.dt, recv, want.data(), want.size(), c.label() + ": result");
  if (!c.inPlace)
    expectBytes(c.dt, in.data(), pattern(c.seed, me, 0, bytes * n).data(), bytes * n, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::gather(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  const bool root = me == c.root;
  Buf in(bytes), out(bytes * n);
  fillBytes(c.seed, me, 0, in.data(), bytes);
  const void* send = in.data();
  void* recv = root || c.inPlace ? out.data() : nullptr;  // recvbuff is only written on the root
  if (root && c.inPlace) {
    fillBytes(c.seed, me, 0, out.data() + me * bytes, bytes);
    send = out.data() + me * bytes;
  }
  HC_ASSERT_OK(hetcclGather(send, recv, c.count, c.dt, c.root, r_.comm, nullptr), r_.comm);
  if (root) {
    std::vector<uint8_t> want(bytes * n);
    for (int r = 0; r < n; ++r) fillBytes(c.seed, r, 0, want.data() + r * bytes, bytes);
    expectBytes(c.dt, out.data(), want.data(), want.size(), c.label() + ": result at the root");
  }
  expectBytes(c.dt, in.data(), pattern(c.seed, me, 0, bytes).data(), bytes, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::scatter(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  const bool root = me == c.root;
  Buf in(bytes * n), out(bytes);
  if (root) fillBytes(c.seed, me, 0, in.data(), bytes * n);
  const void* send = root || c.inPlace ? in.data() : nullptr;  // sendbuff is only read on the root
  void* recv = root && c.inPlace ? in.data() + me * bytes : out.data();
  HC_ASSERT_OK(hetcclScatter(send, recv, c.count, c.dt, c.root, r_.comm, nullptr), r_.comm);
  expectBytes(c.dt, recv, pattern(c.seed, c.root, me * bytes, bytes).data(), bytes, c.label() + ": result");
  if (root)
    expectBytes(c.dt, in.data(), pattern(c.seed, me, 0, bytes * n).data(), bytes * n, c.label() + ": sendbuff changed");
  in.expectGuards(c.label());
  out.expectGuards(c.label());
}

void Checker::sendRecv(const Check& c) {
  const size_t bytes = c.count * ref::typeInfo(c.dt).size;
  const int me = r_.rank, n = r_.nranks;
  // Ring shifts: +1 and +n/2 (across the middle), or -1 with the receives
  // posted first; a single rank sends to itself.
  std::vector<int> shifts;
  if (n == 1)
    shifts = {0};
  else if (c.inPlace)
    shifts = {n - 1};
  else
    shifts = n / 2 > 1 ? std::vector<int>{1, n / 2} : std::vector<int>{1};
  std::vector<Buf> in, out;
  for (int s : shifts) {
    in.emplace_back(bytes);
    out.emplace_back(bytes);
    fillBytes(c.seed + s, me, 0, in.back().data(), bytes);
  }
  HC_ASSERT_OK(hetcclGroupStart(), nullptr);
  for (int pass = 0; pass < 2; ++pass) {
    const bool sends = (pass == 0) != c.inPlace;
    for (size_t k = 0; k < shifts.size(); ++k) {
      int to = (me + shifts[k]) % n, from = (me - shifts[k] + n) % n;
      if (sends)
        HC_ASSERT_OK(hetcclSend(in[k].data(), c.count, c.dt, to, r_.comm, nullptr), r_.comm);
      else
        HC_ASSERT_OK(hetcclRecv(out[k].data(), c.count, c.dt, from, r_.comm, nullptr), r_.comm);
    }
  }
  HC_ASSERT_OK(hetcclGroupEnd(), r_.comm);
  for (size_t k = 0; k < shifts.size(); ++k) {
    int from = (me - shifts[k] + n) % n;
    std::string what = c.label() + " shift " + std::to_string(shifts[k]) + " from rank " + std::to_string(from);
    expectBytes(c.dt, out[k].data(), pattern(c.seed + shifts[k], from, 0, bytes).data(), bytes, what);
    in[k].expectGuards(what);
    out[k].expectGuards(what);
  }
}

}  // namespace hmp
