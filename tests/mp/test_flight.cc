// The flight records of host ranks: how a call's time splits into its steps.
// A call that runs on the calling thread shares clock reads with its steps
// (observe/observed.h): a call of one group step and no local work is that
// step, start to end; a call with local work or several steps keeps each
// step's own reads, and its steps fit inside it.
#include <gtest/gtest.h>
#include <cstdlib>
#include <string>
#include <vector>

#include "flight_dumps.h"
#include "harness.h"

namespace hmp {
namespace {

// Runs body on every rank of `layout`, then has each rank dump its records
// (SIGUSR1) and check them with `check`.
// calls: how many each rank's dump must show completed.
void withRecords(const std::string& layout, size_t calls, const std::function<void(Rank&)>& body,
                 const std::function<void(Rank&, const std::vector<FlightRec>&)>& check) {
  char tmpl[] = "/tmp/hetccl-flight-steps-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  ASSERT_NE(dir, nullptr);
  JobOptions o;
  o.env.emplace_back("HETCCL_FLIGHT_DIR", dir);
  runJob(layout, o, [&](Rank& r) {
    body(r);
    check(r, parseRecords(dumpOnceCompleted(r, calls, r.nranks)));
  });
  EXPECT_EQ(system((std::string("rm -rf ") + dir).c_str()), 0);
}

constexpr double kPrinted = 0.11;  // the dump prints times to 0.1 us

TEST(FlightSteps, AOneStepCallIsItsGroupStepAndLocalWorkIsLeftOut) {
  withRecords(
      "a,a", 2,
      [](Rank& r) {
        std::vector<float> buf(1 << 16, 1.0f);
        for (hetcclRedOp_t op : {hetcclSum, hetcclAvg})
          HC_ASSERT_OK(hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, op, r.comm, nullptr), r.comm);
      },
      [](Rank& r, const std::vector<FlightRec>& recs) {
        ASSERT_EQ(recs.size(), 2u) << "rank " << r.rank;
        for (const FlightRec& x : recs) {
          EXPECT_EQ(x.state, "completed");
          EXPECT_GT(x.group, 0.0) << x.op;
          EXPECT_EQ(x.border, 0.0) << x.op;
          EXPECT_GE(x.end - x.start + kPrinted, x.group) << x.op << ": a step longer than its call";
        }
        // The sum is one group step and nothing else: the same clock reads.
        EXPECT_NEAR(recs[0].group, recs[0].end - recs[0].start, kPrinted);
        // The average divides after its step: that local work is the call's
        // and not the step's, so its record cannot come from the step alone
        // (divide 64K floats: microseconds, more than the print's rounding).
        EXPECT_GT(recs[1].end - recs[1].start, recs[1].group + kPrinted)
            << "the average's division counted into its group step";
      });
}

TEST(FlightSteps, StepsOfACallAcrossGroupsFitInsideIt) {
  withRecords(
      "a,a,b,b", 1,
      [](Rank& r) {
        std::vector<float> buf(1 << 16, 1.0f);
        HC_ASSERT_OK(hetcclAllReduce(buf.data(), buf.data(), buf.size(), hetcclFloat32, hetcclSum, r.comm, nullptr),
                     r.comm);
      },
      [](Rank& r, const std::vector<FlightRec>& recs) {
        ASSERT_EQ(recs.size(), 1u) << "rank " << r.rank;
        const FlightRec& x = recs[0];
        EXPECT_EQ(x.state, "completed");
        EXPECT_GT(x.group, 0.0);
        EXPECT_GT(x.border, 0.0);
        EXPECT_LE(x.group + x.border, x.end - x.start + 2 * kPrinted);
      });
}

}  // namespace
}  // namespace hmp
