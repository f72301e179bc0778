#include "collectives.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace ref {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One splitmix round over the combined key: cheap enough for the 1M-element
// references that every rank computes, and well spread for these keys.
uint64_t hashOf(uint64_t seed, int rank, uint64_t i) {
  return mix((seed << 40) ^ (static_cast<uint64_t>(rank) << 32) ^ (i * 0x9e3779b97f4a7c15ull));
}

// Small integers: every partial sum of up to 8 ranks (also after the 1/n or
// 0.5 pre-multiplication) stays exact in the narrowest type (e5m2: 3
// significant bits, so |partial| <= 8 needs inputs in [-1, 1]).
double smallInt(hetcclDataType_t dt, uint64_t h) {
  const TypeInfo& t = typeInfo(dt);
  int range = dt == hetcclFloat8e5m2 ? 1 : dt == hetcclFloat8e4m3 ? 2 : 3;
  if (!t.isSigned) return static_cast<double>(h % static_cast<uint64_t>(2 * range + 1));
  return static_cast<double>(static_cast<int>(h % static_cast<uint64_t>(2 * range + 1)) - range);
}

// Products: at most two 2s among 8 ranks (|product| <= 4, exact everywhere).
double prodValue(hetcclDataType_t dt, int rank, size_t i) {
  if ((i * 3 + static_cast<size_t>(rank)) % 4 == 0) return 2;
  if (typeInfo(dt).isSigned && (i + 2 * static_cast<size_t>(rank)) % 5 == 0) return -1;
  return 1;
}

// Max/min: values over the type's range, including its extremes (a
// signedness bug in a comparison shows at 2^63 of uint64 or -2^63 of int64).
double wideValue(hetcclDataType_t dt, uint64_t h) {
  const TypeInfo& t = typeInfo(dt);
  const bool extreme = h % 16 == 0;
  switch (dt) {
    case hetcclInt8: return static_cast<double>(static_cast<int8_t>(h >> 8));
    case hetcclUint8: return static_cast<double>(static_cast<uint8_t>(h >> 8));
    case hetcclInt32: return static_cast<double>(static_cast<int32_t>(h >> 8));
    case hetcclUint32: return static_cast<double>(static_cast<uint32_t>(h >> 8));
    case hetcclInt64:
      if (extreme) return (h >> 8) % 2 ? -std::ldexp(1.0, 63) : std::ldexp(1.0, 63) - 1024;
      return static_cast<double>(static_cast<int64_t>(h >> 11) - (int64_t{1} << 52));
    case hetcclUint64:
      if (extreme) return (h >> 8) % 3 == 0 ? 0 : (h >> 8) % 3 == 1 ? std::ldexp(1.0, 63) : std::ldexp(1.0, 64) - 2048;
      return static_cast<double>(h >> 11);
    default: break;
  }
  double sign = (h >> 5) % 2 ? -1 : 1;
  if (extreme) return sign * t.maxFinite;
  double mant = 1 + static_cast<double>((h >> 12) & 0xffff) / 65536;
  int exp = static_cast<int>((h >> 32) % 9) - 4;
  return roundTo(dt, sign * std::ldexp(mant, exp));
}

double uniformValue(hetcclDataType_t dt, uint64_t h) {
  return roundTo(dt, static_cast<double>(h >> 11) * std::ldexp(1.0, -52) - 1.0);
}

// What one rank adds to the combine: its input after the pre-multiplication.
double contribution(const Check& c, int nranks, double x) {
  const bool isFloat = typeInfo(c.dt).isFloat;
  if (c.op == Op::kAvg && isFloat) return roundTo(c.dt, x * (1.0 / nranks));
  if (c.op == Op::kPreMulSum) return isFloat ? roundTo(c.dt, x * preMulScalar(c.dt)) : x * preMulScalar(c.dt);
  return x;
}

}  // namespace

const char* collName(Coll c) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather", "ReduceScatter",
                                "AlltoAll",  "Gather",    "Scatter", "SendRecv"};
  return names[static_cast<int>(c)];
}

const char* opName(Op op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return names[static_cast<int>(op)];
}

bool reduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }

const std::vector<Coll>& allColls() {
  static const std::vector<Coll> v = {Coll::kAllReduce, Coll::kBroadcast,     Coll::kReduce,
                                      Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll,
                                      Coll::kGather,    Coll::kScatter,       Coll::kSendRecv};
  return v;
}

const std::vector<Op>& allOps() {
  static const std::vector<Op> v = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg, Op::kPreMulSum};
  return v;
}

double preMulScalar(hetcclDataType_t dt) { return typeInfo(dt).isFloat ? 0.5 : 3; }

std::string Check::label() const {
  std::string s = std::string(collName(coll)) + " " + typeInfo(dt).name;
  if (reduces(coll)) s += std::string(" ") + opName(op);
  s += " count=" + std::to_string(count) + (inPlace ? " in-place" : " out-of-place");
  if (coll == Coll::kBroadcast || coll == Coll::kReduce || coll == Coll::kGather || coll == Coll::kScatter)
    s += " root=" + std::to_string(root);
  if (values == Values::kRandom) s += " random";
  return s;
}

int exactStride(int nranks) { return nranks <= 8 ? 1 : (nranks + 7) / 8; }

double inputValue(const Check& c, int rank, size_t i) {
  uint64_t h = hashOf(c.seed, rank, i);
  if (c.values == Values::kRandom) return uniformValue(c.dt, h);
  const size_t every = static_cast<size_t>(c.activeEvery);
  const bool active = every <= 1 || (static_cast<size_t>(rank) + i) % every == 0;
  switch (c.op) {
    case Op::kProd: return active ? prodValue(c.dt, every <= 1 ? rank : static_cast<int>((rank + i) / every), i) : 1;
    case Op::kMax:
    case Op::kMin: return wideValue(c.dt, h);
    default: return active ? smallInt(c.dt, h) : 0;
  }
}

void fillInput(const Check& c, int rank, size_t first, size_t n, void* out) {
  const size_t es = typeInfo(c.dt).size;
  for (size_t i = 0; i < n; ++i) storeElem(c.dt, static_cast<uint8_t*>(out) + i * es, inputValue(c, rank, first + i));
}

// Byte j of the stream is byte j%8 of hashOf(seed, rank, j/8) (little-endian).
void fillBytes(uint64_t seed, int rank, size_t offset, void* out, size_t bytes) {
  auto* p = static_cast<uint8_t*>(out);
  size_t b = 0;
  while (b < bytes && (offset + b) % 8 != 0) {  // up to the first whole word
    const size_t at = offset + b;
    p[b++] = static_cast<uint8_t>(hashOf(seed, rank, at / 8) >> (8 * (at % 8)));
  }
  for (; b + 8 <= bytes; b += 8) {  // whole words: the large buffers' fast path
    const uint64_t h = hashOf(seed, rank, (offset + b) / 8);
    memcpy(p + b, &h, 8);
  }
  for (; b < bytes; ++b) {
    const size_t at = offset + b;
    p[b] = static_cast<uint8_t>(hashOf(seed, rank, at / 8) >> (8 * (at % 8)));
  }
}

Expected reduceExpected(const Check& c, int nranks, size_t first, size_t n) {
  Expected e;
  e.value.resize(n);
  e.bound.assign(n, 0.0);
  const TypeInfo& t = typeInfo(c.dt);
  const bool inexactAvg = c.op == Op::kAvg && (nranks & (nranks - 1)) != 0;  // 1/n is not a power of two
  for (size_t i = 0; i < n; ++i) {
    double acc = 0, absSum = 0;
    for (int r = 0; r < nranks; ++r) {
      double x = contribution(c, nranks, inputValue(c, r, first + i));
      absSum += std::fabs(x);
      if (r == 0)
        acc = x;
      else if (c.op == Op::kProd)
        acc *= x;
      else if (c.op == Op::kMax)
        acc = std::max(acc, x);
      else if (c.op == Op::kMin)
        acc = std::min(acc, x);
      else
        acc += x;
    }
    if (c.op == Op::kAvg && !t.isFloat) acc = std::trunc(acc / nranks);
    e.value[i] = acc;
    if (t.isFloat && (c.values == Values::kRandom || inexactAvg)) {
      // Recursive summation in any order: each of the n-1 combines rounds to
      // the type (low-precision types add in float32 first: one more float32
      // rounding); below the normals each rounding errs by at most half the
      // smallest subnormal. An inexact 1/n (avg over n not a power of two)
      // may round each contribution differently: one more u per input.
      double u = unitRoundoff(c.dt) + (t.precision < 24 ? std::ldexp(1.0, -24) : 0);
      int roundings = nranks - 1 + (inexactAvg ? 1 : 0);
      e.bound[i] = roundings * (u * absSum * 1.0001 + minSubnormal(c.dt));
    } else if (roundTo(c.dt, acc) != acc || (!t.isFloat && acc != std::trunc(acc))) {
      throw std::logic_error("test bug: exact reference " + std::to_string(acc) + " of " + c.label() +
                             " is not representable");
    }
  }
  return e;
}

size_t countWrongReduced(const Check& c, const void* got, const Expected& want, size_t* first) {
  const TypeInfo& t = typeInfo(c.dt);
  const auto* g = static_cast<const uint8_t*>(got);
  uint8_t wantBytes[8];
  size_t bad = 0;
  for (size_t i = 0; i < want.value.size(); ++i) {
    bool ok;
    if (!t.isFloat) {
      storeElem(c.dt, wantBytes, want.value[i]);
      ok = memcmp(g + i * t.size, wantBytes, t.size) == 0;
    } else {
      const double v = loadElem(c.dt, g + i * t.size);
      ok = want.bound[i] == 0 ? v == want.value[i] : std::fabs(v - want.value[i]) <= want.bound[i];
    }
    if (!ok && bad++ == 0 && first) *first = i;
  }
  return bad;
}

}  // namespace ref
