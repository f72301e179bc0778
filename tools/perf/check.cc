#include "check.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace perf {
namespace {

// Elements per step of the checks: the expected values of a step are held
// as doubles, so a large buffer is checked in pieces.
constexpr size_t kStep = size_t{1} << 16;

ref::Op refOp(hetcclRedOp_t op) {
  switch (op) {
    case hetcclProd: return ref::Op::kProd;
    case hetcclMax: return ref::Op::kMax;
    case hetcclMin: return ref::Op::kMin;
    case hetcclAvg: return ref::Op::kAvg;
    default: return ref::Op::kSum;
  }
}

int64_t countDifferent(const unsigned char* a, const unsigned char* b, size_t elems, size_t es) {
  if (memcmp(a, b, elems * es) == 0) return 0;
  int64_t bad = 0;
  for (size_t j = 0; j < elems; ++j) bad += memcmp(a + j * es, b + j * es, es) != 0;
  return bad;
}

}  // namespace

Reference::Reference(Coll coll, hetcclDataType_t dt, hetcclRedOp_t op, int nranks, int root)
    : coll_(coll), nranks_(nranks), es_(ref::typeSize(dt)) {
  check_.dt = dt;
  check_.op = refOp(op);
  check_.root = root;
  check_.values = ref::Values::kExact;
  check_.activeEvery = ref::exactStride(nranks);
}

void Reference::input(int rank, size_t first, size_t n, void* out) const {
  if (collReduces(coll_))
    ref::fillInput(check_, rank, first, n, out);
  else
    ref::fillBytes(check_.seed, rank, first * es_, out, n * es_);
}

void Reference::fill(int rank, void* p, size_t elems) const { input(rank, 0, elems, p); }

int64_t Reference::countChangedInput(int rank, const void* p, size_t elems) const {
  const auto* b = static_cast<const unsigned char*>(p);
  std::vector<unsigned char> want(std::min(elems, kStep) * es_);
  int64_t bad = 0;
  for (size_t at = 0; at < elems; at += kStep) {
    const size_t n = std::min(kStep, elems - at);
    input(rank, at, n, want.data());
    bad += countDifferent(want.data(), b + at * es_, n, es_);
  }
  return bad;
}

int64_t Reference::countWrongOutput(int rank, const Geometry& g, const void* recv) const {
  if ((coll_ == Coll::kReduce || coll_ == Coll::kGather) && rank != check_.root) return 0;
  const auto* b = static_cast<const unsigned char*>(recv);
  return collReduces(coll_) ? wrongReduced(rank, g, b) : wrongMoved(rank, g, b);
}

int64_t Reference::wrongReduced(int rank, const Geometry& g, const unsigned char* recv) const {
  const size_t base = coll_ == Coll::kReduceScatter ? static_cast<size_t>(rank) * g.count : 0;
  int64_t bad = 0;
  for (size_t at = 0; at < g.count; at += kStep) {
    const size_t n = std::min(kStep, g.count - at);
    const ref::Expected want = ref::reduceExpected(check_, nranks_, base + at, n);
    bad += static_cast<int64_t>(ref::countWrongReduced(check_, recv + at * es_, want, nullptr));
  }
  return bad;
}

// Blocks of the output, each a stretch of one rank's input stream.
int64_t Reference::wrongMoved(int rank, const Geometry& g, const unsigned char* recv) const {
  struct Block {
    int src;
    size_t first;  // element of src's input stream
    size_t n;
  };
  const size_t count = g.count, me = static_cast<size_t>(rank);
  std::vector<Block> blocks;
  switch (coll_) {
    case Coll::kBroadcast: blocks.push_back({check_.root, 0, g.recvElems}); break;
    case Coll::kSendRecv: blocks.push_back({(rank - 1 + nranks_) % nranks_, 0, g.recvElems}); break;
    case Coll::kScatter: blocks.push_back({check_.root, me * count, count}); break;
    case Coll::kAllGather:
    case Coll::kGather:
      for (int r = 0; r < nranks_; ++r) blocks.push_back({r, 0, count});
      break;
    case Coll::kAlltoAll:
      for (int r = 0; r < nranks_; ++r) blocks.push_back({r, me * count, count});
      break;
    default: return 0;
  }
  std::vector<unsigned char> want(kStep * es_);
  int64_t bad = 0;
  size_t out = 0;  // element of recv
  for (const Block& bl : blocks) {
    for (size_t at = 0; at < bl.n; at += kStep) {
      const size_t n = std::min(kStep, bl.n - at);
      input(bl.src, bl.first + at, n, want.data());
      bad += countDifferent(want.data(), recv + (out + at) * es_, n, es_);
    }
    out += bl.n;
  }
  return bad;
}

}  // namespace perf
