// Inputs are small integers, valid in every type. For sum, prod, max and min
// they are chosen so that every partial result (in any order and grouping) is
// exactly representable in the type, so a correct library gives the exact
// result and it is compared exactly, also for floating types: a tolerance there
// could only hide a lost or doubled contribution (fp8 spaces its integers 1 or
// 2 apart above 8 or 16). Averages of floating types are rounded, by each
// rank's premultiplication by 1/nranks and by the sums that follow, and are
// compared with a relative tolerance per type.
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "reference/elements.h"

namespace perf {
namespace {

bool isFp8(hetcclDataType_t dt) { return dt == hetcclFloat8e4m3 || dt == hetcclFloat8e5m2; }

// How many ranks may feed one output element while every partial result stays
// exact in a floating type: sums of inputs in [-1, 3] (fp8: [-1, 1]) need
// integers up to 3k exact; products of inputs of magnitude 1 or 2 need 2^k
// finite. More ranks than this take turns (see stride_).
size_t exactRanks(hetcclDataType_t dt, hetcclRedOp_t op) {
  constexpr size_t kAny = std::numeric_limits<size_t>::max();
  if (!ref::isFloating(dt) || op == hetcclMax || op == hetcclMin) return kAny;  // integers wrap alike on both sides
  if (op == hetcclProd) {
    switch (dt) {
      case hetcclHalf: return 15;        // 2^15 < 65504
      case hetcclFloat8e4m3: return 8;   // 2^8 < 448
      case hetcclFloat8e5m2: return 15;  // 2^15 < 57344
      case hetcclBfloat16:
      case hetcclFloat: return 127;
      default: return 1023;
    }
  }
  switch (dt) {
    case hetcclHalf: return 682;       // 3k <= 2048
    case hetcclBfloat16: return 85;    // 3k <= 256
    case hetcclFloat8e4m3: return 16;  // |sum| <= 16, inputs in [-1, 1]
    case hetcclFloat8e5m2: return 8;   // |sum| <= 8
    case hetcclFloat: return (1u << 24) / 3;
    default: return kAny;
  }
}

}  // namespace

double Reference::avgTolerance(hetcclDataType_t dt) {
  switch (dt) {
    case hetcclFloat:
    case hetcclDouble: return 1e-5;
    case hetcclHalf: return 1e-2;
    case hetcclBfloat16: return 2e-2;
    case hetcclFloat8e4m3: return 0.13;
    case hetcclFloat8e5m2: return 0.26;
    default: return 0;
  }
}

Reference::Reference(Coll coll, hetcclDataType_t dt, hetcclRedOp_t op, int nranks, int root)
    : coll_(coll), dt_(dt), op_(op), nranks_(nranks), root_(root), es_(ref::typeSize(dt)) {
  size_t k = exactRanks(dt, op);
  size_t n = static_cast<size_t>(nranks);
  stride_ = (collReduces(coll) && k < n) ? (n + k - 1) / k : 1;
  for (int v = -1; v <= 16; ++v) {
    stored_[v + 1] = ref::isFloating(dt) ? ref::roundTo(dt, v) : v;
    ref::storeRounded(dt, encoded_[v + 1], stored_[v + 1]);
  }
}

int Reference::smallInt(int rank, size_t idx) const {
  // (rank*7 + idx*3) mod m, for m in {3, 5, 17}: 255 is a multiple of each.
  const size_t key = static_cast<size_t>(rank) * 7 + (idx % 255) * 3;
  const bool uns = ref::isUnsignedInt(dt_);
  if (!collReduces(coll_)) return static_cast<int>(key % 17) - (uns ? 0 : 1);  // moved data: -1..15 or 0..16
  const bool active = stride_ == 1 || (static_cast<size_t>(rank) + idx) % stride_ == 0;
  switch (op_) {
    case hetcclMax:
    case hetcclMin: return static_cast<int>(key % 5) - (uns ? 0 : 1);
    case hetcclProd: {
      if (!active) return 1;
      size_t m = key % 5;
      return m == 0 ? 2 : (m == 1 && !uns) ? -1 : 1;
    }
    default:  // sum, avg
      if (!active) return 0;
      if (isFp8(dt_)) return static_cast<int>(key % 3) - 1;
      return static_cast<int>(key % 5) - (uns ? 0 : 1);
  }
}

void Reference::fill(int rank, void* p, size_t elems) const {
  unsigned char* b = static_cast<unsigned char*>(p);
  for (size_t j = 0; j < elems; ++j) memcpy(b + j * es_, encoded(smallInt(rank, j)), es_);
}

int64_t Reference::countChangedInput(int rank, const void* p, size_t elems) const {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  int64_t bad = 0;
  for (size_t j = 0; j < elems; ++j) bad += memcmp(encoded(smallInt(rank, j)), b + j * es_, es_) != 0;
  return bad;
}

int64_t Reference::countWrongOutput(int rank, const Geometry& g, const void* recv) const {
  if ((coll_ == Coll::kReduce || coll_ == Coll::kGather) && rank != root_) return 0;
  const unsigned char* b = static_cast<const unsigned char*>(recv);
  return collReduces(coll_) ? wrongReduced(rank, g, b) : wrongMoved(rank, g, b);
}

int64_t Reference::wrongReduced(int rank, const Geometry& g, const unsigned char* recv) const {
  const size_t base = coll_ == Coll::kReduceScatter ? static_cast<size_t>(rank) * g.count : 0;
  const bool floating = ref::isFloating(dt_);
  const double tol = op_ == hetcclAvg ? avgTolerance(dt_) : 0.0;
  int64_t bad = 0;
  unsigned char want[8];
  for (size_t i = 0; i < g.count; ++i) {
    const size_t idx = base + i;
    const unsigned char* got = recv + i * es_;
    if (floating) {
      double acc = 0, absSum = 0;
      for (int r = 0; r < nranks_; ++r) {
        double x = stored(smallInt(r, idx));
        absSum += std::fabs(x);
        if (r == 0)
          acc = x;
        else if (op_ == hetcclProd)
          acc *= x;
        else if (op_ == hetcclMax)
          acc = std::max(acc, x);
        else if (op_ == hetcclMin)
          acc = std::min(acc, x);
        else
          acc += x;
      }
      double limit = 0;
      if (op_ == hetcclAvg) {
        acc /= nranks_;
        limit = tol * absSum / nranks_;  // summation error scales with the sum of magnitudes
      }
      double diff = std::fabs(ref::loadElem(dt_, got) - ref::roundTo(dt_, acc));
      bad += !(diff <= limit);  // NaN counts as wrong
    } else {
      // Two's complement: sums and products wrap alike in 64 bits and in the type.
      uint64_t acc = 0;
      int64_t best = 0;
      for (int r = 0; r < nranks_; ++r) {
        int64_t x = smallInt(r, idx);
        uint64_t ux = static_cast<uint64_t>(x);
        if (r == 0)
          acc = ux, best = x;
        else if (op_ == hetcclProd)
          acc *= ux;
        else if (op_ == hetcclMax)
          best = std::max(best, x);
        else if (op_ == hetcclMin)
          best = std::min(best, x);
        else
          acc += ux;
      }
      if (op_ == hetcclMax || op_ == hetcclMin) acc = static_cast<uint64_t>(best);
      if (op_ == hetcclAvg) {
        // The sum as the type holds it, then division truncating toward zero.
        ref::storeBits(dt_, want, acc);
        uint64_t s = ref::loadBits(dt_, want);
        acc = ref::isUnsignedInt(dt_) ? s / static_cast<uint64_t>(nranks_)
                                      : static_cast<uint64_t>(static_cast<int64_t>(s) / nranks_);
      }
      ref::storeBits(dt_, want, acc);
      bad += memcmp(want, got, es_) != 0;
    }
  }
  return bad;
}

int64_t Reference::wrongMoved(int rank, const Geometry& g, const unsigned char* recv) const {
  const size_t count = g.count, me = static_cast<size_t>(rank);
  const int prev = (rank - 1 + nranks_) % nranks_;
  int64_t bad = 0;
  for (size_t j = 0; j < g.recvElems; ++j) {
    int src = 0;
    size_t idx = 0;
    switch (coll_) {
      case Coll::kBroadcast: src = root_, idx = j; break;
      case Coll::kSendRecv: src = prev, idx = j; break;
      case Coll::kAllGather:
      case Coll::kGather: src = static_cast<int>(j / count), idx = j % count; break;
      case Coll::kAlltoAll: src = static_cast<int>(j / count), idx = me * count + j % count; break;
      case Coll::kScatter: src = root_, idx = me * count + j; break;
      default: return 0;
    }
    bad += memcmp(encoded(smallInt(src, idx)), recv + j * es_, es_) != 0;
  }
  return bad;
}

}  // namespace perf
