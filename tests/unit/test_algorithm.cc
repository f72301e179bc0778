// algorithm/: low-precision conversions (lowp.h) and host reductions (host_reduce.h).
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "elements/host_reduce.h"
#include "algorithm/local_ops.h"
#include "algorithm/self_exchange.h"
#include "comm/comm.h"
#include "elements/lowp.h"
#include "unit_util.h"

namespace hetccl {
namespace {

float fromBits(uint32_t b) { return std::bit_cast<float>(b); }
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(Bf16, RoundsToNearestEven) {
  const std::pair<uint32_t, uint16_t> cases[] = {
      {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80},                        // tie, even stays
      {0x3f818000, 0x3f82},                                              // tie, odd rounds up
      {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},                        // either side of the tie
      {0xbf818000, 0xbf82}, {0x7f7f7fff, 0x7f7f}, {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to infinity
      {0x7f800000, 0x7f80}, {0xff800000, 0xff80}, {0x00000000, 0x0000},
      {0x80000000, 0x8000}, {0x00018000, 0x0002}, {0x00008000, 0x0000},  // subnormal ties
  };
  for (auto [in, out] : cases) EXPECT_EQ(floatToBf16(fromBits(in)), out) << std::hex << in;
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(kNaN))));
  // A NaN whose payload sits in the low bits must not truncate to infinity.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0xff800001)))));
}

TEST(Half, RoundsToNearestEven) {
  const std::pair<float, uint16_t> cases[] = {
      {1.0f, 0x3c00},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},      // tie, even stays
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},  // tie, odd rounds up
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01},
      {65504.0f, 0x7bff},
      {65519.0f, 0x7bff},
      {65520.0f, 0x7c00},
      {1e6f, 0x7c00},
      {-1e6f, 0xfc00},
      {std::ldexp(1.0f, -24), 0x0001},      // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},      // tie to even (zero)
      {3 * std::ldexp(1.0f, -25), 0x0002},  // tie to even (2)
      {std::ldexp(1.0f, -25) + std::ldexp(1.0f, -40), 0x0001},
      {-0.0f, 0x8000},
      {kInf, 0x7c00},
  };
  for (auto [in, out] : cases) EXPECT_EQ(floatToHalf(in), out) << in;
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(kNaN))));
}

TEST(Half, EveryNonNaNValueOfHalfAndBf16RoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    float f = halfToFloat(v), b = bf16ToFloat(v);
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToHalf(f), h) << std::hex << h;
    }
    if (!std::isnan(b)) {
      ASSERT_EQ(floatToBf16(b), h) << std::hex << h;
    }
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(bf16ToFloat(floatToBf16(b)))) << std::hex << h;
    }
  }
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
}

struct Fp8Case {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float);
  float maxFinite, minSubnormal, minNormal;
  uint8_t maxCode, oneCode;
  int nanCodes;
  bool hasInf;
};
const Fp8Case kFp8[] = {
    {"e4m3", fp8e4m3ToFloat, floatToFp8e4m3, 448.0f, 0x1p-9f, 0x1p-6f, 0x7e, 0x38, 2, false},
    {"e5m2", fp8e5m2ToFloat, floatToFp8e5m2, 57344.0f, 0x1p-16f, 0x1p-14f, 0x7b, 0x3c, 6, true},
};

class Fp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8, DecodeTableLandmarks) {
  const Fp8Case& c = GetParam();
  int nans = 0, infs = 0;
  for (int v = 0; v < 256; ++v) {
    float f = c.decode(static_cast<uint8_t>(v));
    nans += std::isnan(f);
    infs += std::isinf(f);
    if (!std::isnan(f)) {
      EXPECT_EQ(std::signbit(f), v >= 0x80) << v;
    }
    if (!std::isnan(f) && !std::isinf(f)) {
      EXPECT_LE(std::fabs(f), c.maxFinite) << v;
    }
  }
  EXPECT_EQ(nans, c.nanCodes);
  EXPECT_EQ(infs, c.hasInf ? 2 : 0);
  EXPECT_TRUE(std::isnan(c.decode(0x7f)) && std::isnan(c.decode(0xff)));
  EXPECT_TRUE(c.decode(0x00) == 0.0f && std::signbit(c.decode(0x80)));
  EXPECT_EQ(c.decode(0x01), c.minSubnormal);
  EXPECT_EQ(c.decode(c.oneCode), 1.0f);
  EXPECT_EQ(c.decode(c.maxCode), c.maxFinite);
  EXPECT_EQ(c.decode(c.maxCode | 0x80), -c.maxFinite);
  EXPECT_EQ(c.encode(c.minNormal), c.hasInf ? 0x04 : 0x08);
}

TEST_P(Fp8, EveryFiniteCodeRoundTrips) {
  for (int v = 0; v < 256; ++v) {
    float f = GetParam().decode(static_cast<uint8_t>(v));
    if (std::isfinite(f)) {
      EXPECT_EQ(GetParam().encode(f), v) << GetParam().name << " code " << v << " = " << f;
    }
  }
}

// Between two neighbouring codes: below the midpoint rounds down, above
// rounds up, the midpoint itself goes to the even code. Subnormals included.
TEST_P(Fp8, RoundsToNearestEvenBetweenEveryPairOfCodes) {
  const Fp8Case& c = GetParam();
  for (int v = 0; v < c.maxCode; ++v) {
    for (uint8_t sign : {0x00, 0x80}) {
      float lo = c.decode(static_cast<uint8_t>(v | sign)), hi = c.decode(static_cast<uint8_t>((v + 1) | sign));
      float mid = (lo + hi) / 2;
      uint8_t even = static_cast<uint8_t>(((v & 1) ? v + 1 : v) | sign);
      EXPECT_EQ(c.encode(mid), even) << c.name << " between codes " << v << " and " << v + 1;
      EXPECT_EQ(c.encode(std::nextafter(mid, hi)), (v + 1) | sign) << c.name << " above mid of " << v;
      EXPECT_EQ(c.encode(std::nextafter(mid, lo)), v | sign) << c.name << " below mid of " << v;
    }
  }
}

TEST_P(Fp8, SaturatesNaNStaysTinyFlushes) {
  const Fp8Case& c = GetParam();
  for (float big : {c.maxFinite, c.maxFinite * 1.01f, c.maxFinite * 1.0625f, c.maxFinite * 2, 1e30f, FLT_MAX, kInf}) {
    EXPECT_EQ(c.encode(big), c.maxCode) << big;
    EXPECT_EQ(c.encode(-big), c.maxCode | 0x80) << -big;
  }
  // NaN stays NaN; below half the smallest subnormal is a signed zero.
  EXPECT_TRUE(std::isnan(c.decode(c.encode(kNaN))));
  EXPECT_TRUE(std::isnan(c.decode(c.encode(-kNaN))));
  EXPECT_EQ(c.encode(c.minSubnormal / 4), 0x00);
  EXPECT_EQ(c.encode(-c.minSubnormal / 4), 0x80);
  EXPECT_EQ(c.encode(c.minSubnormal * 0.75f), 0x01);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8, ::testing::ValuesIn(kFp8),
                         [](const auto& i) { return std::string(i.param.name); });

TEST(Lowp, ElementToDoubleReadsEveryType) {
  struct {
    int8_t i8 = -5;
    uint8_t u8 = 250;
    int32_t i32 = -70000;
    uint32_t u32 = 4000000000u;
    int64_t i64 = -(int64_t{1} << 40);
    uint64_t u64 = uint64_t{1} << 63;
    uint16_t h = 0x3e00, bf = 0x4040;  // 1.5, 3.0
    float f = 2.25f;
    double d = -1e300;
    uint8_t e4 = 0x38, e5 = 0x3c;  // 1.0, 1.0
  } v;
  const std::tuple<const void*, DataType, double> cases[] = {{&v.i8, hetcclInt8, -5},
                                                             {&v.u8, hetcclUint8, 250},
                                                             {&v.i32, hetcclInt32, -70000},
                                                             {&v.u32, hetcclUint32, 4e9},
                                                             {&v.i64, hetcclInt64, -1099511627776.0},
                                                             {&v.u64, hetcclUint64, 0x1p63},
                                                             {&v.h, hetcclFloat16, 1.5},
                                                             {&v.f, hetcclFloat32, 2.25},
                                                             {&v.d, hetcclFloat64, -1e300},
                                                             {&v.bf, hetcclBfloat16, 3.0},
                                                             {&v.e4, hetcclFloat8e4m3, 1.0},
                                                             {&v.e5, hetcclFloat8e5m2, 1.0}};
  for (auto [p, dt, want] : cases) EXPECT_EQ(elementToDouble(p, dt), want) << dataTypeName(dt);
}

// ---- host reductions ----

// Random elements of a type: integers any bits (so sums and products wrap),
// floats finite and moderate.
std::vector<uint8_t> randomElems(DataType dt, size_t n, std::mt19937_64& rng) {
  const size_t es = dataTypeSize(dt);
  std::vector<uint8_t> out(n * es);
  std::uniform_real_distribution<float> u(-100, 100);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    float f = u(rng);
    double d = f * 1e5 + u(rng);
    uint16_t h = dt == hetcclFloat16 ? floatToHalf(f) : floatToBf16(f);
    f *= 1000;
    if (dt == hetcclFloat8e4m3) bits = floatToFp8e4m3(f / 4000);
    if (dt == hetcclFloat8e5m2) bits = floatToFp8e5m2(f / 100);
    const void* src = dt == hetcclFloat32                             ? static_cast<const void*>(&f)
                      : dt == hetcclFloat64                           ? static_cast<const void*>(&d)
                      : (dt == hetcclFloat16 || dt == hetcclBfloat16) ? static_cast<const void*>(&h)
                                                                      : static_cast<const void*>(&bits);
    memcpy(out.data() + i * es, src, es);
  }
  return out;
}

// The reference: integers in unsigned arithmetic (wrapping), floats IEEE with
// NaN winning max/min, low precision in float rounded once to the type.
template <class V>
V refOp(V a, V b, RedKind k) {
  if constexpr (std::is_integral_v<V>) {
    using U = std::make_unsigned_t<V>;
    if (k == RedKind::kSum) return static_cast<V>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    if (k == RedKind::kProd) return static_cast<V>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    if (k == RedKind::kSum) return a + b;
    if (k == RedKind::kProd) return a * b;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<V>::quiet_NaN();
  }
  return k == RedKind::kMax ? (a > b ? a : b) : (a < b ? a : b);
}
template <class S, class V = S>
void refElem(uint8_t* o, const uint8_t* a, const uint8_t* b, RedKind k, V (*ld)(S) = nullptr, S (*st)(V) = nullptr) {
  S x, y, r;
  memcpy(&x, a, sizeof(S));
  memcpy(&y, b, sizeof(S));
  if constexpr (std::is_same_v<S, V>)
    r = refOp(x, y, k);
  else
    r = st(refOp(ld(x), ld(y), k));
  memcpy(o, &r, sizeof(S));
}
void refReduce(uint8_t* o, const uint8_t* a, const uint8_t* b, DataType dt, RedKind k) {
  switch (dt) {
    case hetcclInt8: return refElem<int8_t>(o, a, b, k);
    case hetcclUint8: return refElem<uint8_t>(o, a, b, k);
    case hetcclInt32: return refElem<int32_t>(o, a, b, k);
    case hetcclUint32: return refElem<uint32_t>(o, a, b, k);
    case hetcclInt64: return refElem<int64_t>(o, a, b, k);
    case hetcclUint64: return refElem<uint64_t>(o, a, b, k);
    case hetcclFloat16: return refElem<uint16_t, float>(o, a, b, k, halfToFloat, floatToHalf);
    case hetcclFloat32: return refElem<float>(o, a, b, k);
    case hetcclFloat64: return refElem<double>(o, a, b, k);
    case hetcclBfloat16: return refElem<uint16_t, float>(o, a, b, k, bf16ToFloat, floatToBf16);
    case hetcclFloat8e4m3: return refElem<uint8_t, float>(o, a, b, k, fp8e4m3ToFloat, floatToFp8e4m3);
    case hetcclFloat8e5m2: return refElem<uint8_t, float>(o, a, b, k, fp8e5m2ToFloat, floatToFp8e5m2);
    default: FAIL();
  }
}
// Same element, NaN equal to any NaN.
bool sameElem(const uint8_t* x, const uint8_t* y, DataType dt) {
  if (dataTypeIsFloat(dt) && std::isnan(elementToDouble(x, dt))) return std::isnan(elementToDouble(y, dt));
  return memcmp(x, y, dataTypeSize(dt)) == 0;
}

TEST(ReduceArrays, EveryTypeAndOpMatchesTheScalarModel) {
  std::mt19937_64 rng(12345);
  for (int t = 0; t < hetcclNumTypes; ++t) {
    DataType dt = static_cast<DataType>(t);
    const size_t es = dataTypeSize(dt);
    for (RedKind k : {RedKind::kSum, RedKind::kProd, RedKind::kMax, RedKind::kMin}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{1031}}) {
        SCOPED_TRACE(std::string(dataTypeName(dt)) + " " + redKindName(k) + " n=" + std::to_string(n));
        auto a = randomElems(dt, n, rng), b = randomElems(dt, n, rng);
        std::vector<uint8_t> out(n * es + 3, 0xcd), want(n * es);
        for (size_t i = 0; i < n; ++i) refReduce(&want[i * es], &a[i * es], &b[i * es], dt, k);
        reduceArrays(out.data(), a.data(), b.data(), n, dt, k);
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(sameElem(&out[i * es], &want[i * es], dt))
              << "element " << i << ": got " << elementToDouble(&out[i * es], dt) << " want "
              << elementToDouble(&want[i * es], dt);
        EXPECT_EQ(out[n * es], 0xcd) << "wrote past the end";
        // In place, either operand.
        auto a2 = a, b2 = b;
        reduceArrays(a2.data(), a2.data(), b.data(), n, dt, k);
        reduceArrays(b2.data(), a.data(), b2.data(), n, dt, k);
        EXPECT_EQ(memcmp(a2.data(), out.data(), n * es), 0);
        EXPECT_EQ(memcmp(b2.data(), out.data(), n * es), 0);
      }
    }
  }
}

template <class T>
void expectWrap(DataType dt, RedKind k, T a, T b, T want) {
  std::vector<T> x(9, a), y(9, b), out(9);
  reduceArrays(out.data(), x.data(), y.data(), 9, dt, k);
  for (T v : out) EXPECT_EQ(v, want) << dataTypeName(dt) << " " << redKindName(k) << " " << +a << ", " << +b;
}

TEST(ReduceArrays, IntegersWrapAround) {
  expectWrap<int8_t>(hetcclInt8, RedKind::kSum, 127, 1, -128);
  expectWrap<int8_t>(hetcclInt8, RedKind::kProd, 16, 16, 0);
  expectWrap<int8_t>(hetcclInt8, RedKind::kProd, -128, -1, -128);
  expectWrap<uint8_t>(hetcclUint8, RedKind::kSum, 200, 100, 44);
  expectWrap<int32_t>(hetcclInt32, RedKind::kSum, INT32_MAX, 1, INT32_MIN);
  expectWrap<int32_t>(hetcclInt32, RedKind::kProd, 65536, 65536, 0);
  expectWrap<uint32_t>(hetcclUint32, RedKind::kSum, 0xffffffffu, 2, 1);
  expectWrap<int64_t>(hetcclInt64, RedKind::kSum, INT64_MIN, -1, INT64_MAX);
  expectWrap<uint64_t>(hetcclUint64, RedKind::kSum, UINT64_MAX, 1, 0);
  expectWrap<uint64_t>(hetcclUint64, RedKind::kMax, UINT64_MAX, 1, UINT64_MAX);  // unsigned compare
  expectWrap<int64_t>(hetcclInt64, RedKind::kMin, INT64_MIN, 1, INT64_MIN);
}

TEST(ReduceArrays, MaxAndMinPropagateNaNFromEitherSide) {
  const DataType floats[] = {hetcclFloat16,  hetcclFloat32,    hetcclFloat64,
                             hetcclBfloat16, hetcclFloat8e4m3, hetcclFloat8e5m2};
  const size_t n = 1031;
  std::mt19937_64 rng(7);
  for (DataType dt : floats) {
    const size_t es = dataTypeSize(dt);
    auto a = randomElems(dt, n, rng), b = randomElems(dt, n, rng);
    const uint64_t nanBits[] = {
        0, 0x7f, dt == hetcclFloat16 ? 0x7e00u : 0x7fc0u, 0, 0x7fc00000, 0, 0, 0, 0x7ff8000000000000};
    std::vector<uint8_t> nan(es);
    memcpy(nan.data(), &nanBits[es], es);
    for (size_t i = 0; i < n; i += 3) memcpy(&(i % 2 ? a : b)[i * es], nan.data(), es);
    for (RedKind k : {RedKind::kMax, RedKind::kMin}) {
      std::vector<uint8_t> out(n * es);
      reduceArrays(out.data(), a.data(), b.data(), n, dt, k);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::isnan(elementToDouble(&out[i * es], dt)), i % 3 == 0)
            << dataTypeName(dt) << " " << redKindName(k) << " element " << i;
    }
  }
}

TEST(ReduceArrays, LowPrecisionRoundsOnceAndSaturates) {
  uint16_t a[2] = {0x3c00, 0x3c01}, b[2] = {floatToHalf(0x1p-11f), floatToHalf(0x1p-11f)}, out[2];
  reduceArrays(out, a, b, 2, hetcclFloat16, RedKind::kSum);
  EXPECT_EQ(out[0], 0x3c00) << "1 + 2^-11: tie to even";
  EXPECT_EQ(out[1], 0x3c02) << "1 + 3 * 2^-11: tie to even";
  uint8_t m4 = 0x7e, m5 = 0x7b, o8;
  reduceArrays(&o8, &m4, &m4, 1, hetcclFloat8e4m3, RedKind::kSum);
  EXPECT_EQ(o8, 0x7e) << "448 + 448 saturates to 448";
  reduceArrays(&o8, &m5, &m5, 1, hetcclFloat8e5m2, RedKind::kSum);
  EXPECT_EQ(o8, 0x7b) << "57344 + 57344 saturates to 57344";
}

TEST(ScaleArray, FloatsMultiplyAndIntegersUseTheRoundedScalar) {
  std::vector<float> f = {1.5f, -2.0f, 3e38f, 0.1f}, fo(4);
  std::vector<double> d = {0.3, -7.0}, dout(2);
  std::vector<int32_t> i = {5, -6, 7};
  std::vector<int8_t> b = {100, -100};
  uint16_t h[2] = {floatToHalf(3.0f), floatToHalf(-0.5f)}, ho[2];
  uint8_t e = 0x7e, eo;
  int64_t untouched = 99;
  scaleArray(fo.data(), f.data(), 4, hetcclFloat32, 2.0);
  scaleArray(dout.data(), d.data(), 2, hetcclFloat64, 0.1);
  scaleArray(i.data(), i.data(), 3, hetcclInt32, 2.6);  // in place; x3
  EXPECT_EQ(i, (std::vector<int32_t>{15, -18, 21}));
  scaleArray(i.data(), i.data(), 3, hetcclInt32, -1.4);  // x-1
  scaleArray(b.data(), b.data(), 2, hetcclInt8, 3.0);    // wraps
  scaleArray(ho, h, 2, hetcclFloat16, 0.5);
  scaleArray(&eo, &e, 1, hetcclFloat8e4m3, 4.0);
  scaleArray(&untouched, &untouched, 0, hetcclInt64, 5.0);
  EXPECT_EQ(fo, (std::vector<float>{3.0f, -4.0f, kInf, 0.2f}));
  EXPECT_EQ(dout, (std::vector<double>{0.3 * 0.1, -7.0 * 0.1}));
  EXPECT_EQ(i, (std::vector<int32_t>{-15, 18, -21}));
  EXPECT_EQ(b, (std::vector<int8_t>{44, -44}));
  EXPECT_EQ(halfToFloat(ho[0]), 1.5f);
  EXPECT_EQ(halfToFloat(ho[1]), -0.25f);
  EXPECT_EQ(eo, 0x7e) << "scaled beyond 448 saturates";
  EXPECT_EQ(untouched, 99);
}

TEST(DivideArray, IntegersTruncateTowardZeroFloatsAreRefused) {
  std::vector<int32_t> i = {-7, 7, 9, -1, 0};
  std::vector<uint8_t> u = {255, 3};
  std::vector<int64_t> l = {INT64_MIN, INT64_MAX};
  divideArray(i.data(), i.size(), hetcclInt32, 2);
  divideArray(u.data(), u.size(), hetcclUint8, 4);
  divideArray(l.data(), l.size(), hetcclInt64, 3);
  EXPECT_EQ(i, (std::vector<int32_t>{-3, 3, 4, 0, 0}));
  EXPECT_EQ(u, (std::vector<uint8_t>{63, 0}));
  EXPECT_EQ(l, (std::vector<int64_t>{INT64_MIN / 3, INT64_MAX / 3}));
  float f = 1;
  EXPECT_HETCCL_ERROR(divideArray(&f, 1, hetcclFloat32, 2), hetcclInternalError, "divideArray");
}

TEST(FoldOrdered, FoldsLeftToRightInPartOrder) {
  const size_t n = 1000;
  std::vector<float> p0(n, 1e20f), p1(n, -1e20f), p2(n, 1.0f), dst(n), scratch(n);
  const void* parts[] = {p0.data(), p1.data(), p2.data()};
  foldOrdered(dst.data(), parts, 3, n, hetcclFloat32, RedKind::kSum, scratch.data());
  for (float v : dst) ASSERT_EQ(v, 1.0f) << "(p0 + p1) + p2";
  const void* rev[] = {p2.data(), p1.data(), p0.data()};
  foldOrdered(dst.data(), rev, 3, n, hetcclFloat32, RedKind::kSum, scratch.data());
  for (float v : dst) ASSERT_EQ(v, 0.0f) << "(p2 + p1) + p0";
}

TEST(FoldOrdered, DestinationMayBeAnyOfTheParts) {
  const int np = 4;
  const size_t n = 1031;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> orig(np, std::vector<float>(n));
  for (auto& p : orig)
    for (auto& v : p) v = u(rng);
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = ((orig[0][i] + orig[1][i]) + orig[2][i]) + orig[3][i];
  for (int k = 0; k < np; ++k) {
    auto parts = orig;
    std::vector<float> scratch(n);
    const void* ptrs[np] = {parts[0].data(), parts[1].data(), parts[2].data(), parts[3].data()};
    foldOrdered(parts[k].data(), ptrs, np, n, hetcclFloat32, RedKind::kSum, scratch.data());
    EXPECT_EQ(parts[k], want) << "dst == parts[" << k << "]";
  }
  // Two parts need no scratch; one part is a copy (or nothing when aliased).
  std::vector<int32_t> a = {1, 9, -3}, b = {4, 2, -8}, c(3, 0);
  const void* two[] = {a.data(), b.data()};
  foldOrdered(b.data(), two, 2, 3, hetcclInt32, RedKind::kMax, nullptr);
  EXPECT_EQ(b, (std::vector<int32_t>{4, 9, -3}));
  const void* one[] = {a.data()};
  foldOrdered(c.data(), one, 1, 3, hetcclInt32, RedKind::kSum, nullptr);
  EXPECT_EQ(c, a);
  foldOrdered(a.data(), one, 1, 3, hetcclInt32, RedKind::kSum, nullptr);
  EXPECT_EQ(a, (std::vector<int32_t>{1, 9, -3}));
}

// LocalOps::fold (the plan's fold after whole receives, HETCCL_PLAN_FOLDS)
// combines in the order of foldOrdered, bit for bit.
TEST(LocalOps, FoldMatchesFoldOrderedBitForBit) {
  Comm c(1, 0, CommOptions{});
  HostLocalOps lo(c);
  const size_t n = 777;
  std::mt19937 rng(11);
  for (int np = 1; np <= 4; ++np) {
    std::vector<std::vector<uint16_t>> parts(np, std::vector<uint16_t>(n));
    for (auto& p : parts)
      for (auto& v : p) v = static_cast<uint16_t>(rng() & 0x7f7f);  // finite bfloat16 values of both signs
    std::vector<const void*> ptrs;
    for (auto& p : parts) ptrs.push_back(p.data());
    std::vector<uint16_t> want(n), got(n), tmp(n);
    foldOrdered(want.data(), ptrs.data(), np, n, hetcclBfloat16, RedKind::kSum, tmp.data());
    lo.fold(got.data(), ptrs.data(), np, n, hetcclBfloat16, RedKind::kSum, tmp.data());
    EXPECT_EQ(got, want) << np << " parts";
  }
}

// Sends to self pair with receives from self in order; a group call whose
// counts or sizes do not pair copies nothing and says why.
TEST(SelfExchange, PairsInOrderOrCopiesNothing) {
  int a[3] = {1, 2, 3}, b[2] = {7, 8}, x[3] = {}, y[2] = {};
  EXPECT_EQ(copySelfExchanges({{a, sizeof(a)}, {b, sizeof(b)}}, {{x, sizeof(x)}, {y, sizeof(y)}}), "");
  EXPECT_EQ(x[2], 3);
  EXPECT_EQ(y[1], 8);
  int u[3] = {}, v[2] = {};
  EXPECT_NE(copySelfExchanges({{a, sizeof(a)}, {b, sizeof(b)}}, {{u, sizeof(u)}}).find("2 sends to self but 1"),
            std::string::npos);
  const std::string why = copySelfExchanges({{a, sizeof(a)}, {b, sizeof(b)}}, {{u, sizeof(u)}, {v, 4}});
  EXPECT_NE(why.find("send to self of 8 bytes meets a receive of 4 bytes"), std::string::npos) << why;
  EXPECT_EQ(u[0], 0);  // the first pair matched, but nothing was copied
}

}  // namespace
}  // namespace hetccl
