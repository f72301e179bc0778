// The collective matrix: every collective x data type x op x size {1, 7,
// 1000} x in-place/out-of-place, on each group layout and transport; size 0
// is the ZeroCount test below. One job (one communicator per rank) per
// (layout, transport, collective) runs the inner loop over types, ops, sizes
// and in-place: setup costs a fraction of a second, and a collective that
// hangs or breaks its communicator then hides nothing about the others.
//
// Each (layout, transport, collective) runs twice: with the default
// settings, and "tight": HETCCL_SMALL_BYTES=0 (even small AllReduces take
// the sharded bandwidth plan, not only the latency plan) and
// HETCCL_BUFFSIZE=HETCCL_SHM_SLOT_BYTES=4096 (the minimum: 1000 elements
// already need several chunks, staging rounds and ring slots).
//
#include <gtest/gtest.h>

#include <cmath>

#include "checks.h"
#include "layouts.h"

namespace hmp {
namespace {

struct MatrixParam {
  std::string layout;
  std::string transport;
  Coll coll;
  bool tight;  // smallest plan thresholds and buffers
};

// fp8 sums beyond the largest finite value saturate at every combine:
// inputs of about 3/4 of the maximum on every rank give exactly +-max,
// whatever the order of the combines.
void checkSaturation(const Rank& r, hetcclDataType_t dt) {
  const double big = ref::roundTo(dt, 0.75 * ref::typeInfo(dt).maxFinite);
  const size_t count = 7;
  std::vector<uint8_t> in(count), out(count, 0);
  for (size_t i = 0; i < count; ++i) ref::storeElem(dt, &in[i], i % 2 ? -big : big);
  r.progress(std::string("saturation ") + ref::typeInfo(dt).name);
  HC_ASSERT_OK(hetcclAllReduce(in.data(), out.data(), count, dt, hetcclSum, r.comm, nullptr), r.comm);
  if (r.nranks == 1) return;
  for (size_t i = 0; i < count; ++i)
    EXPECT_EQ(ref::loadElem(dt, &out[i]), i % 2 ? -ref::typeInfo(dt).maxFinite : ref::typeInfo(dt).maxFinite)
        << ref::typeInfo(dt).name << " AllReduce sum of " << r.nranks << " x " << (i % 2 ? -big : big) << ", element "
        << i;
}

// PreMulSum with the scalar "on the device" (for host ranks: in the rank's
// own memory) works like the host-immediate one the Checker uses.
void checkPreMulSumDeviceScalar(const Rank& r) {
  float scalar = 0.5f;
  hetcclRedOp_t op;
  HC_ASSERT_OK(hetcclRedOpCreatePreMulSum(&op, &scalar, hetcclFloat32, hetcclScalarDevice, r.comm), r.comm);
  std::vector<float> buf(9, static_cast<float>(r.rank + 1));
  r.progress("PreMulSum with hetcclScalarDevice");
  HC_ASSERT_OK(hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, op, r.comm, nullptr), r.comm);
  for (float v : buf) EXPECT_EQ(v, 0.25f * r.nranks * (r.nranks + 1)) << "sum of (rank+1) * 0.5";
  HC_EXPECT_OK(hetcclRedOpDestroy(op, r.comm), r.comm);
}

// Every type x op x in-place/out-of-place of one collective at each size.
void sweep(const Rank& r, Checker& ck, Coll coll, const std::vector<size_t>& sizes) {
  const std::vector<hetcclDataType_t>& types = ref::allTypes();
  const std::vector<Op> ops = reduces(coll) ? allOps() : std::vector<Op>{Op::kSum};
  uint64_t seed = 1;
  for (size_t s = 0; s < sizes.size(); ++s)
    for (size_t t = 0; t < types.size(); ++t)
      for (size_t o = 0; o < ops.size(); ++o)
        for (bool inPlace : {false, true}) {
          Check c;
          c.coll = coll;
          c.dt = types[t];
          c.op = ops[o];
          c.count = sizes[s];
          c.inPlace = inPlace;
          c.root = static_cast<int>((t + o + s + inPlace) % r.nranks);  // roots in every group
          c.seed = ++seed;
          ck.run(c);
        }
}

void runMatrix(Rank& r, const MatrixParam& p) {
  expectInfoMatchesLayout(r);
  Checker ck(r);
  const std::vector<hetcclDataType_t>& types = ref::allTypes();
  sweep(r, ck, p.coll, {1, 7, 1000});
  if (!reduces(p.coll)) return;
  // Random floats: results within the rounding bound; AllReduce results
  // bit-identical on every rank and from one run to the next (each check
  // runs twice with the same seed; reportSame compares every hash).
  for (hetcclDataType_t dt : types) {
    if (!ref::typeInfo(dt).isFloat) continue;
    for (Op op : {Op::kSum, Op::kAvg, Op::kPreMulSum})
      for (int run = 0; run < 2; ++run) {
        Check c;
        c.coll = p.coll;
        c.dt = dt;
        c.op = op;
        c.count = 1000;
        c.root = r.nranks - 1;
        c.values = Values::kRandom;
        c.seed = 7777 + dt;
        ck.run(c);
      }
    if (p.coll == Coll::kAllReduce && ref::typeInfo(dt).saturates) checkSaturation(r, dt);
  }
  if (p.coll == Coll::kAllReduce) checkPreMulSumDeviceScalar(r);
}

class Matrix : public ::testing::TestWithParam<MatrixParam> {};

// The ofi transport's matrix in CI: AllReduce on every layout over
// libfabric's tcp provider, every collective on a,b,a,b over its shm
// provider; with every message written by RMA (the "_rma" forms),
// AllReduce and AllGather on a,b,a,b over each; the rest with
// HETCCL_TEST_FULL=1.
bool ofiSampled(const MatrixParam& p) {
  if (p.transport == "ofi_tcp_rma" || p.transport == "ofi_shm_rma")
    return p.layout == "a,b,a,b" && (p.coll == Coll::kAllReduce || p.coll == Coll::kAllGather);
  return (p.transport == "ofi_tcp" && p.coll == Coll::kAllReduce) ||
         (p.transport == "ofi_shm" && p.layout == "a,b,a,b");
}

TEST_P(Matrix, EveryTypeOpSize) {
  const MatrixParam& p = GetParam();
  if (p.transport.rfind("ofi_", 0) == 0 && !ofiSampled(p) && !fullTests())
    GTEST_SKIP() << "the ofi matrix beyond its sample runs with HETCCL_TEST_FULL=1";
  JobOptions opt;
  opt.transport = p.transport;
  opt.deadlineS = 200;
  if (p.tight) {
    opt.env.emplace_back("HETCCL_SMALL_BYTES", "0");
    opt.env.emplace_back("HETCCL_BUFFSIZE", "4096");
    opt.env.emplace_back("HETCCL_SHM_SLOT_BYTES", "4096");
  }
  runJob(p.layout, opt, [&](Rank& r) { runMatrix(r, p); });
}

std::vector<MatrixParam> matrixParams() {
  std::vector<MatrixParam> v;
  for (const std::string& layout : allLayouts())
    for (const std::string& transport : allTransports())
      for (Coll coll : allColls()) {
        v.push_back({layout, transport, coll, false});
        v.push_back({layout, transport, coll, true});
      }
  for (const std::string& layout : ucxLayouts())
    for (const std::string& transport : ucxTransports())
      for (Coll coll : allColls()) v.push_back({layout, transport, coll, layout == "a,b,a,b"});
  // AllReduce with the border folded by the plan (HETCCL_PLAN_FOLDS: whole
  // receives into scratch, then the folds): over
  // tcp on an uneven, an interleaved and a 3-group layout, and over ucx.
  for (const std::string layout : {"a,a,a,b", "a,b,a,b", "a,b,c,c"}) {
    v.push_back({layout, "tcp_planfold", Coll::kAllReduce, false});
    v.push_back({layout, "tcp_planfold", Coll::kAllReduce, true});
  }
  v.push_back({"a,a,a,b", "ucx_sm_planfold", Coll::kAllReduce, true});
  for (const std::string& layout : allLayouts())
    for (const std::string& transport : ofiTransports())
      for (Coll coll : allColls()) {
        v.push_back({layout, transport, coll, layout == "a,b,a,b"});
        v.push_back({layout, transport + "_rma", coll, layout == "a,b,a,b"});
      }
  return v;
}

void PrintTo(const MatrixParam& p, std::ostream* os) {
  *os << p.layout << " " << p.transport << " " << collName(p.coll) << (p.tight ? " tight buffers" : "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, Matrix, ::testing::ValuesIn(matrixParams()),
                         [](const ::testing::TestParamInfo<MatrixParam>& i) {
                           return layoutTag(i.param.layout) + "_" + i.param.transport + "_" + collName(i.param.coll) +
                                  (i.param.tight ? "_tight" : "");
                         });

// Count 0 for every collective, type, op and in-place form: nothing moves,
// so early returns and empty buffers are what is tested. One job per layout
// and transport; nothing moves, so HETCCL_TIMEOUT_S=5 is ample and keeps a
// hang from costing CI 30 s per job.
// AlltoAll runs last: in-place AlltoAll with count 0 used to hang (its copy
// of the empty input had a NULL data pointer, and a send with a NULL buffer
// was taken for a receive; fixed in 44ac852), and a hang hides what follows.
struct ZeroParam {
  std::string layout;
  std::string transport;
};

class ZeroCount : public ::testing::TestWithParam<ZeroParam> {};

TEST_P(ZeroCount, EveryCollectiveTypeOp) {
  JobOptions opt;
  opt.transport = GetParam().transport;
  opt.env.emplace_back("HETCCL_TIMEOUT_S", "5");
  runJob(GetParam().layout, opt, [](Rank& r) {
    Checker ck(r);
    for (Coll coll : allColls())
      if (coll != Coll::kAlltoAll) sweep(r, ck, coll, {0});
    sweep(r, ck, Coll::kAlltoAll, {0});
  });
}

std::vector<ZeroParam> zeroParams() {
  std::vector<ZeroParam> v;
  for (const std::string& layout : allLayouts())
    for (const std::string& transport : allTransports()) v.push_back({layout, transport});
  return v;
}

void PrintTo(const ZeroParam& p, std::ostream* os) { *os << p.layout << " " << p.transport; }

INSTANTIATE_TEST_SUITE_P(Layouts, ZeroCount, ::testing::ValuesIn(zeroParams()),
                         [](const ::testing::TestParamInfo<ZeroParam>& i) {
                           return layoutTag(i.param.layout) + "_" + i.param.transport;
                         });

}  // namespace
}  // namespace hmp
