// The flight recorder of GPU ranks (ranks on emulated GPUs, or on a real
// one with HETCCL_TEST_GPU): what it records of calls across groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "flight_dumps.h"
#include "harness.h"

namespace hmp {
namespace {

// A fresh folder for the ranks' flight dumps (HETCCL_FLIGHT_DIR in the
// options it makes), removed at the end.
struct FlightDir {
  char path[32] = "/tmp/hetccl-emu-flight-XXXXXX";
  const bool made = mkdtemp(path) != nullptr;
  FlightDir() = default;
  FlightDir(const FlightDir&) = delete;
  FlightDir& operator=(const FlightDir&) = delete;
  ~FlightDir() {
    if (made) {
      EXPECT_EQ(system((std::string("rm -rf ") + path).c_str()), 0);
    }
  }
  JobOptions options(std::vector<std::string> devices) const {
    JobOptions o;
    o.devices = std::move(devices);
    o.env.emplace_back("HETCCL_FLIGHT_DIR", path);
    return o;
  }
};

// The flight recorder of GPU ranks: calls across groups (a border call, a
// staged one, a pair-channel send and receive) are recorded as completed
// once the proxy saw them end, with their border bytes and time (the
// border's from 1 MiB on). Each rank asks for its dump by SIGUSR1 until
// the proxy has got that far.
TEST(EmuFlight, CallsAcrossGroupsAreRecordedCompleted) {
  FlightDir dir;
  ASSERT_TRUE(dir.made);
  JobOptions o = dir.options({testGpuKind(), testGpuKind()});
  o.env.emplace_back("HETCCL_GPU_BORDER_MIN", "64K");  // the small AllReduce stages
  runJob("a,b", o, [](Rank& r) {
    DeviceBuffer big(r, 2 << 20), small(r, 1024), mid(r, 256 << 10);
    HC_ASSERT_OK(hetcclAllReduce(big.get(), big.get(), 1 << 18, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclAllReduce(small.get(), small.get(), 256, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    const int peer = 1 - r.rank;
    HC_ASSERT_OK(hetcclGroupStart(), r.comm);
    HC_ASSERT_OK(hetcclSend(big.get(), 1 << 18, hetcclFloat32, peer, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclRecv(static_cast<char*>(big.get()) + (1 << 20), 1 << 18, hetcclFloat32, peer, r.comm, r.stream),
                 r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    // Below 1 MiB the border is timed in a sample only (its timed events
    // would cost a small call more than it takes); the sample's first gap is
    // longer than one call (its seed is fixed: the first gap is 41).
    HC_ASSERT_OK(hetcclAllReduce(mid.get(), mid.get(), 1 << 16, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    syncStream(r);
    const std::string text = dumpOnceCompleted(r, 5, 0);
    EXPECT_EQ(countOf(text, "\"completed\""), 5u) << "three AllReduce calls, a send and a receive\n" << text;
    EXPECT_EQ(countOf(text, "\"enqueued\""), 0u) << text;
    // Their border steps ran on the proxy, and the records carry them: each
    // AllReduce's and the group's first (the send) moved bytes between the
    // groups; the receive's are on the send's record.
    EXPECT_EQ(countOf(text, "\"border_host_bytes\": 0,"), 1u) << text;
    // And took time: the device border's of 1 MiB (the AllReduce, the send
    // and receive) between timed events on the device, the staged one's on
    // the proxy's transport; the receive's are on the send's record, and the
    // 256 KiB AllReduce is not (see above).
    EXPECT_EQ(countOf(text, "\"border_us\": 0.0,"), 2u) << text;
  });
}

// Small calls through the device border: about one in 64 is timed, at
// random (SmallCallSampler::sample), the others cost no timed events;
// a timed one's record has its own border time (the metrics count it for
// the calls since the last: unit tests).
TEST(EmuFlight, AboutOneSmallBorderCallInSixtyFourIsTimed) {
  FlightDir dir;
  ASSERT_TRUE(dir.made);
  JobOptions o = dir.options({testGpuKind(), testGpuKind()});
  o.env.emplace_back("HETCCL_FLIGHT_RECORDER", "1000");
  o.env.emplace_back("HETCCL_GPU_BORDER_MIN", "0");  // every call takes the device border
  runJob("a,b", o, [](Rank& r) {
    constexpr int kCalls = 640;
    DeviceBuffer small(r, 1024);
    for (int i = 0; i < kCalls; ++i)
      HC_ASSERT_OK(hetcclAllReduce(small.get(), small.get(), 256, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    syncStream(r);
    const std::string text = dumpOnceCompleted(r, kCalls, 0);
    const std::vector<FlightRec> recs = parseRecords(text);
    ASSERT_EQ(recs.size(), static_cast<size_t>(kCalls));
    const auto timed = std::count_if(recs.begin(), recs.end(), [](const FlightRec& x) { return x.border > 0; });
    EXPECT_GE(timed, 3) << "records with border time, of " << kCalls;  // 10 expected
    EXPECT_LE(timed, 25) << "records with border time, of " << kCalls;
  });
}

// Groups of two GPUs: the vendor library's group steps run on the device,
// around the border, with no host step to time; each call through the
// device border is timed from its start to its end on the device, and
// what is not border time is the group's. Every rank's AllReduce (group
// reduce-scatter, border, group all-gather) and AllGather (border, then
// the group's exchange) has both, and they fit inside the call.
TEST(EmuFlight, GroupStepsOfDeviceBorderCallsHaveTime) {
  FlightDir dir;
  ASSERT_TRUE(dir.made);
  JobOptions o = dir.options({"emu", "emu", "emu", "emu"});
  o.env.emplace_back("HETCCL_GPU_BORDER_MIN", "0");  // every call takes the device border
  runJob("a,a,b,b", o, [](Rank& r) {
    DeviceBuffer big(r, 4 << 20);
    HC_ASSERT_OK(hetcclAllReduce(big.get(), big.get(), 1 << 18, hetcclFloat32, hetcclSum, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(
        hetcclAllGather(big.get(), static_cast<char*>(big.get()) + (1 << 20), 1 << 16, hetcclFloat32, r.comm, r.stream),
        r.comm);
    syncStream(r);
    const std::string text = dumpOnceCompleted(r, 2, r.nranks);
    ASSERT_EQ(countOf(text, "\"completed\""), 2u) << text;
    const std::vector<FlightRec> recs = parseRecords(text);
    for (const FlightRec& x : recs) {
      EXPECT_GT(x.group, 0.0) << x.coll << "'s group steps have no time\n" << text;
      EXPECT_GT(x.border, 0.0) << x.coll << "\n" << text;
      EXPECT_LE(x.group + x.border, x.end - x.start + 0.2) << x.coll << ": steps longer than the call\n" << text;
    }
    EXPECT_EQ(recs.size(), 2u) << text;
  });
}

}  // namespace
}  // namespace hmp
