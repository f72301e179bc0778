// The reference model of the element types (tools/reference/elements.h)
// that the suites' expected results come from: known encodings, and where
// the compiler has a type of its own (_Float16, float's top half for
// bfloat16), agreement with it on every encoding and on rounding; and
// hetccl-perf's checker over the collective reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "reference/elements.h"

namespace {

TEST(ReferenceElements, KnownEncodings) {
  struct {
    hetcclDataType_t t;
    double v;
    uint32_t bits;
  } cases[] = {
      {hetcclFloat16, 1, 0x3c00},      {hetcclFloat16, -2, 0xc000},
      {hetcclFloat16, 0.25, 0x3400},   {hetcclFloat16, 16, 0x4c00},
      {hetcclFloat16, 65504, 0x7bff},  {hetcclFloat16, 0x1p-24, 0x0001},
      {hetcclBfloat16, 1, 0x3f80},     {hetcclBfloat16, -0.5, 0xbf00},
      {hetcclFloat8e4m3, 1, 0x38},     {hetcclFloat8e4m3, -16, 0xd8},
      {hetcclFloat8e4m3, 0.25, 0x28},  {hetcclFloat8e4m3, 7, 0x4e},
      {hetcclFloat8e4m3, 448, 0x7e},   {hetcclFloat8e4m3, 0x1p-9, 0x01},
      {hetcclFloat8e5m2, 1, 0x3c},     {hetcclFloat8e5m2, 6, 0x46},
      {hetcclFloat8e5m2, -0.25, 0xb4}, {hetcclFloat8e5m2, -0.0, 0x80},
      {hetcclFloat8e5m2, 57344, 0x7b}, {hetcclFloat16, 0, 0},
  };
  for (const auto& c : cases) {
    uint32_t got = 0;
    ref::storeElem(c.t, &got, c.v);
    EXPECT_EQ(got, c.bits) << ref::typeInfo(c.t).name << " " << c.v;
    EXPECT_EQ(ref::loadElem(c.t, &got), c.v) << ref::typeInfo(c.t).name << " " << c.v;
  }
}

TEST(ReferenceElements, HalfAgreesWithTheCompiler) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    _Float16 h;
    memcpy(&h, &bits, 2);
    const double want = static_cast<double>(h), got = ref::loadElem(hetcclFloat16, &bits);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    else
      EXPECT_EQ(got, want) << std::hex << b;
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(-2, 2);
  std::uniform_int_distribution<int> exp(-30, 18);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::ldexp(mant(rng), exp(rng));
    const _Float16 h = static_cast<_Float16>(x);  // round to nearest, ties to even
    uint16_t want, got;
    memcpy(&want, &h, 2);
    ref::storeRounded(hetcclFloat16, &got, x);
    ASSERT_EQ(got, want) << x;
  }
}

TEST(ReferenceElements, Bfloat16IsFloatsTopHalf) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const uint32_t wide = b << 16;
    float f;
    memcpy(&f, &wide, 4);
    const double got = ref::loadElem(hetcclBfloat16, &bits);
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    else
      EXPECT_EQ(got, f) << std::hex << b;
  }
}

// Every fp8 encoding but NaN stores back to itself (one zero of each sign);
// values beyond the largest finite saturate, as the library's fp8 results do.
TEST(ReferenceElements, Fp8RoundTripsAndSaturates) {
  for (hetcclDataType_t t : {hetcclFloat8e4m3, hetcclFloat8e5m2}) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint8_t bits = static_cast<uint8_t>(b);
      const double v = ref::loadElem(t, &bits);
      if (std::isnan(v) || std::isinf(v)) continue;
      uint8_t back = 0;
      ref::storeElem(t, &back, v);
      EXPECT_EQ(back, bits) << ref::typeInfo(t).name << " " << v;
    }
  }
  EXPECT_EQ(ref::roundTo(hetcclFloat8e4m3, 1000), 448);
  EXPECT_EQ(ref::roundTo(hetcclFloat8e4m3, -470), -448);
  EXPECT_EQ(ref::roundTo(hetcclFloat8e5m2, 1e6), 57344);
  EXPECT_EQ(ref::roundTo(hetcclFloat8e4m3, 0.3), 0.3125);  // 0.3 between 0.28125 and 0.3125
  EXPECT_TRUE(std::isinf(ref::roundTo(hetcclFloat16, 1e6)));
}

TEST(ReferenceElements, IntegersWrapWhenRoundedAndRefuseWhenExact) {
  uint8_t b = 0;
  ref::storeRounded(hetcclInt8, &b, 300);
  EXPECT_EQ(b, 300 - 256);
  ref::storeRounded(hetcclUint8, &b, -1);
  EXPECT_EQ(b, 255);
  EXPECT_THROW(ref::storeElem(hetcclInt8, &b, 300), std::logic_error);
  EXPECT_THROW(ref::storeElem(hetcclInt32, &b, 0.5), std::logic_error);
  EXPECT_THROW(ref::storeElem(hetcclFloat16, &b, 0.1), std::logic_error);
  uint64_t big = 0;
  ref::storeRounded(hetcclUint64, &big, 0x1p63);
  EXPECT_EQ(big, uint64_t{1} << 63);
  EXPECT_EQ(ref::loadBits(hetcclInt32, &big), 0u);
  int32_t neg = -5;
  EXPECT_EQ(static_cast<int64_t>(ref::loadBits(hetcclInt32, &neg)), -5);
  EXPECT_EQ(ref::describeElem(hetcclInt32, &neg), "-5 (0xfffffffb)");
}

}  // namespace

namespace {

// hetccl-perf's checker over the shared reference: a right result counts
// no wrong element, one changed element counts one; on 4 ranks and on 20
// (where only every third rank feeds an element, to stay exact).
TEST(PerfReference, CountsExactlyTheWrongElements) {
  for (int nranks : {4, 20}) {
    for (hetcclDataType_t dt : {hetcclInt8, hetcclFloat16, hetcclFloat8e5m2, hetcclFloat64}) {
      for (hetcclRedOp_t op : {hetcclSum, hetcclProd, hetcclMax, hetcclAvg}) {
        SCOPED_TRACE(std::string(ref::typeInfo(dt).name) + " op " + std::to_string(op) + " on " +
                     std::to_string(nranks));
        perf::Reference reference(perf::Coll::kAllReduce, dt, op, nranks, 0);
        const size_t count = 1000, es = ref::typeSize(dt);
        perf::Geometry g;
        g.count = g.sendElems = g.recvElems = count;
        // The right result: every rank's input combined in double, rounded once.
        std::vector<std::vector<uint8_t>> in(nranks, std::vector<uint8_t>(count * es));
        for (int r = 0; r < nranks; ++r) reference.fill(r, in[r].data(), count);
        std::vector<uint8_t> out(count * es);
        for (size_t i = 0; i < count; ++i) {
          double acc = 0;
          for (int r = 0; r < nranks; ++r) {
            double x = ref::loadElem(dt, in[r].data() + i * es);
            if (op == hetcclAvg && ref::isFloating(dt)) x = ref::roundTo(dt, x / nranks);
            acc = r == 0 ? x : op == hetcclProd ? acc * x : op == hetcclMax ? std::max(acc, x) : acc + x;
          }
          if (op == hetcclAvg && !ref::isFloating(dt)) acc = std::trunc(acc / nranks);
          ref::storeRounded(dt, out.data() + i * es, acc);
        }
        EXPECT_EQ(reference.countWrongOutput(0, g, out.data()), 0);
        EXPECT_EQ(reference.countChangedInput(3, in[3].data(), count), 0);
        out[7 * es + es - 1] ^= 0x40;  // an exponent bit: beyond any bound
        in[3][9 * es] ^= 0x40;
        EXPECT_EQ(reference.countWrongOutput(0, g, out.data()), 1);
        EXPECT_EQ(reference.countChangedInput(3, in[3].data(), count), 1);
      }
    }
  }
}

// The data-moving side: AlltoAll's block from each rank is that rank's
// stretch of its input stream.
TEST(PerfReference, AlltoAllBlocksComeFromEachRanksStream) {
  const int nranks = 5, me = 2;
  const size_t count = 300, es = 4;
  perf::Reference reference(perf::Coll::kAlltoAll, hetcclFloat32, hetcclSum, nranks, 0);
  perf::Geometry g;
  g.count = count;
  g.sendElems = g.recvElems = count * nranks;
  std::vector<uint8_t> out(count * nranks * es), send(count * nranks * es);
  for (int r = 0; r < nranks; ++r) {
    reference.fill(r, send.data(), count * nranks);
    memcpy(out.data() + r * count * es, send.data() + me * count * es, count * es);
  }
  EXPECT_EQ(reference.countWrongOutput(me, g, out.data()), 0);
  out[(2 * count + 5) * es] ^= 1;
  EXPECT_EQ(reference.countWrongOutput(me, g, out.data()), 1);
}

}  // namespace
