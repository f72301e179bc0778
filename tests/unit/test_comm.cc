// The communicator layer's parts that stand alone: the flight recorder, the
// call counters of the metrics endpoint, and the border cut's weights.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "comm/auto_transport.h"
#include "comm/border_cut.h"
#include "border/border_relay.h"
#include "observe/flight_recorder.h"
#include "observe/observed.h"
#include "border/pair_links.h"
#include "border/pair_relay.h"
#include "topology/peer.h"
#include "unit_util.h"

namespace hetccl {
namespace {

FlightRecorder::Call allReduce(size_t count) {
  return {CollKind::kAllReduce, false, count, hetcclFloat32, hetcclSum, -1};
}

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(FlightRecorder, KeepsTheLastCallsAndHowTheyEnded) {
  FlightRecorder f(4, "");
  const uint64_t a = f.issue({allReduce(10), {CollKind::kSendRecv, true, 5, hetcclInt8, hetcclSum, 3}});
  EXPECT_EQ(a, 1u);
  f.finish(a, 2, hetcclSuccess);
  const uint64_t b = f.issue({allReduce(20)});
  EXPECT_EQ(b, 3u);
  f.finish(b, 1, hetcclRemoteError);
  for (int i = 0; i < 3; ++i) f.issue({allReduce(30 + i)});  // seq 4-6: 1 and 2 fall out
  f.finish(1, 1, hetcclSuccess);                             // overwritten since: nothing happens
  EXPECT_EQ(f.size(), 4u);
  const std::string j = f.json(1, 4, "abc", "why \"quoted\"\n");
  EXPECT_EQ(occurrences(j, "\"seq\""), 4u) << j;
  EXPECT_EQ(j.find("\"seq\": 2,"), std::string::npos) << j;
  EXPECT_NE(j.find("\"seq\": 3, \"coll\": \"AllReduce\", \"count\": 20"), std::string::npos) << j;
  EXPECT_NE(j.find("\"state\": \"failed\", \"result\": " + std::to_string(hetcclRemoteError)), std::string::npos) << j;
  EXPECT_EQ(occurrences(j, "\"state\": \"issued\""), 3u) << j;
  EXPECT_NE(j.find("\"reason\": \"why \\\"quoted\\\"\\u000a\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"format\": \"hetccl-flight-1\""), std::string::npos) << j;
}

TEST(FlightRecorder, OffRecordsNothingAndDumpsNothing) {
  FlightRecorder f(0, "/tmp");
  EXPECT_EQ(f.issue({allReduce(1)}), 0u);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.dump(0, 1, "x", "test"), "");
}

TEST(FlightRecorder, DumpsToItsFolderAndWarnsWhereItCannot) {
  char tmpl[] = "/tmp/hetccl-unit-flight-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  FlightRecorder f(8, dir);
  f.issue({allReduce(7)}, FlightRecorder::State::kEnqueued);
  const std::string path = f.dump(2, 4, "feed", "aborted");
  EXPECT_EQ(path, dir + "/hetccl-flight-feed-rank2.json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"state\": \"enqueued\""), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\"rank\": 2"), std::string::npos);
  unlink(path.c_str());
  rmdir(dir.c_str());
  // The folder is gone now: no file, no throw (a warning in the log).
  EXPECT_EQ(f.dump(2, 4, "feed", "aborted"), "");
}

// The counters as the endpoint renders them: nccl-tests' sizes and bus
// factors, outcomes, the histogram's cumulative buckets, in-flight calls.
TEST(CallMetrics, CountsCallsAsNcclTestsSizesThem) {
  CallMetrics m(4);
  FlightRecorder f(8, "", &m);
  const uint64_t a = f.issue({allReduce(256), {CollKind::kAllGather, false, 256, hetcclFloat32, hetcclSum, -1}});
  std::string text;
  m.render(8, "rank=\"0\"", text, false);
  EXPECT_EQ(text, "hetccl_calls_in_flight{rank=\"0\"} 2\n");
  f.finish(a, 2, hetcclSuccess);
  f.finish(f.issue({allReduce(1)}), 1, hetcclRemoteError);
  f.issue({allReduce(8)}, FlightRecorder::State::kEnqueued, false);  // a GPU call inside one group
  EXPECT_EQ(m.inFlight(), 0u);
  EXPECT_EQ(m.payloadBytes(CollKind::kAllGather, 256, hetcclFloat32), 4096u);
  EXPECT_DOUBLE_EQ(m.busFactor(CollKind::kAllReduce), 1.5);
  EXPECT_DOUBLE_EQ(m.busFactor(CollKind::kAllGather), 0.75);
  EXPECT_DOUBLE_EQ(m.busFactor(CollKind::kBroadcast), 1.0);
  std::string all;
  for (int fam = 0; fam < CallMetrics::families(); ++fam) m.render(fam, "rank=\"0\"", all, true);
  EXPECT_NE(all.find("hetccl_calls_total{rank=\"0\",collective=\"AllReduce\",size=\"0-1KiB\",status=\"ok\"} 1\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("hetccl_calls_total{rank=\"0\",collective=\"AllGather\",size=\"1KiB-64KiB\",status=\"ok\"} 1\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("collective=\"AllReduce\",size=\"0-1KiB\",status=\"failed\"} 1\n"), std::string::npos) << all;
  EXPECT_NE(all.find("collective=\"AllReduce\",size=\"0-1KiB\",status=\"enqueued\"} 1\n"), std::string::npos) << all;
  // Bytes of calls that ended well, and enqueued ones: 1024 + 4096 + 32.
  EXPECT_NE(all.find("hetccl_bytes_total{rank=\"0\",collective=\"AllReduce\"} 1056\n"), std::string::npos) << all;
  EXPECT_NE(all.find("hetccl_bytes_total{rank=\"0\",collective=\"AllGather\"} 4096\n"), std::string::npos) << all;
  EXPECT_NE(all.find("hetccl_call_duration_seconds_bucket{rank=\"0\",collective=\"AllReduce\",le=\"+Inf\"} 2\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("hetccl_call_duration_seconds_count{rank=\"0\",collective=\"AllReduce\"} 2\n"), std::string::npos)
      << all;
  EXPECT_NE(all.find("hetccl_errors_total{rank=\"0\",result=\"remote_error\"} 1\n"), std::string::npos) << all;
  EXPECT_NE(all.find("hetccl_errors_total{rank=\"0\",result=\"system_error\"} 0\n"), std::string::npos) << all;
  // AllReduce over 4 ranks: 1024 B x 1.5; AllGather 4096 B x 0.75.
  EXPECT_NE(all.find("hetccl_bus_bytes_total{rank=\"0\",collective=\"AllReduce\"} 1536\n"), std::string::npos) << all;
  EXPECT_NE(all.find("hetccl_bus_bytes_total{rank=\"0\",collective=\"AllGather\"} 3072\n"), std::string::npos) << all;
  EXPECT_EQ(occurrences(all, "# TYPE "), static_cast<size_t>(CallMetrics::families())) << all;
  // Steps: the border share is border time over both.
  m.step(CallMetrics::kGroup, 100, 1.0);
  m.step(CallMetrics::kBorderHost, 300, 3.0);
  std::string share;
  m.render(7, "", share, false);
  EXPECT_EQ(share, "hetccl_border_time_share{} 0.75\n");
  const FlightRecorder::Progress p = f.progress();
  EXPECT_EQ(p.issued, 4u);
  EXPECT_EQ(p.lastEnded.seq, 3u);
  EXPECT_EQ(p.oldestOpen.seq, 0u);  // the enqueued call's end is never seen: not open
  // A group call's steps go on its first record.
  CallMetrics::Tally t;
  t.us[CallMetrics::kGroup] = 5;
  t.bytes[CallMetrics::kBorderHost] = 7;
  f.finish(f.issue({allReduce(2), allReduce(3)}), 2, hetcclSuccess, &t);
  f.setContext("\"transport\": \"shm+tcp\"");
  const std::string j = f.json(0, 4, "x", "test");
  EXPECT_NE(j.find(" \"transport\": \"shm+tcp\",\n \"records\": ["), std::string::npos) << j;
  EXPECT_EQ(occurrences(j, "\"group_us\": 5.0,"), 1u) << j;
  EXPECT_EQ(occurrences(j, "\"border_host_bytes\": 7,"), 1u) << j;
}

// A sampled small call's step time: the counters take it as the calls it
// stands for, the call's own tally (its flight record) as it was.
TEST(CallMetrics, ASampledStepCountsForTheCallsItStandsFor) {
  CallMetrics m(2);
  StepScope scope;
  countStepTime(m, CallMetrics::kBorderHost, 10.0, 64);
  countStepTime(m, CallMetrics::kGroup, 30.0, 64);
  const CallMetrics::Tally t = takeStepTally();
  EXPECT_DOUBLE_EQ(t.us[CallMetrics::kBorderHost], 10.0);
  EXPECT_DOUBLE_EQ(t.us[CallMetrics::kGroup], 30.0);
  std::string steps, share;
  m.render(6, "", steps, false);
  m.render(7, "", share, false);
  auto value = [](const std::string& text, const std::string& series) {
    const size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  EXPECT_NEAR(value(steps, "link=\"border_host\"} "), 64 * 10e-6, 1e-8) << steps;
  EXPECT_NEAR(value(steps, "link=\"group\"} "), 64 * 30e-6, 1e-8) << steps;
  EXPECT_NEAR(value(share, "hetccl_border_time_share{} "), 0.25, 1e-6) << share;
}

// Groups by rank, all on one host ("g<label>").
Topology topoOf(const std::vector<int>& labels) {
  std::vector<PeerInfo> peers(labels.size());
  for (size_t r = 0; r < labels.size(); ++r) {
    peers[r].rank = static_cast<int>(r);
    snprintf(peers[r].deviceKind, sizeof(peers[r].deviceKind), "host");
    snprintf(peers[r].group, sizeof(peers[r].group), "g%d", labels[r]);
  }
  return buildTopology(peers);
}

TEST(BorderCut, WeightsFollowTheSlowerEndOfEachLinkInSixteenths) {
  const Topology t = topoOf({0, 0, 1, 1});  // pairs (0,2) and (1,3) under the size cut
  EXPECT_EQ(sizeCutBorderPeers(t, 0), (std::vector<int>{2}));
  EXPECT_EQ(sizeCutBorderPeers(t, 3), (std::vector<int>{1}));
  EXPECT_EQ(borderWeights(t, {1, 4, 1, 4}), (std::vector<double>{4, 16, 4, 16}));
  // Rank 2 measured its link at 2 but rank 0 at 1: both ends take 1.
  EXPECT_EQ(borderWeights(t, {1, 4, 2, 4}), (std::vector<double>{4, 16, 4, 16}));
  // Unknown rates (0) count as the fastest; no weight below 1/16.
  EXPECT_EQ(borderWeights(t, {0, 100, 100, 0}), (std::vector<double>{16, 16, 16, 16}));
  EXPECT_EQ(borderWeights(t, {0.001, 100, 0.001, 100}), (std::vector<double>{1, 16, 1, 16}));
  // A lone rank's weight is its group's whole (one shard).
  const Topology u = topoOf({0, 0, 0, 1});
  EXPECT_EQ(sizeCutBorderPeers(u, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(borderWeights(u, {10, 20, 40, 5}), (std::vector<double>{16, 16, 16, 16}));
  EXPECT_EQ(borderWeights(u, {10, 20, 40, 50}), (std::vector<double>{4, 8, 16, 16}));
}

TEST(BorderCut, LinkRateHintsReadAsANumberOrByRank) {
  test::EnvGuard launcher("RANK", nullptr);
  {
    test::EnvGuard e("HETCCL_LINK_GBPS", "12.5");
    EXPECT_EQ(linkGbpsHint(3), 12.5);
  }
  {
    test::EnvGuard e("HETCCL_LINK_GBPS", "0-1:100,2-3:25");
    EXPECT_EQ(linkGbpsHint(1), 100);
    EXPECT_EQ(linkGbpsHint(2), 25);
    EXPECT_EQ(linkGbpsHint(4), 0);  // not named: none
  }
  {
    test::EnvGuard e("HETCCL_LINK_GBPS", nullptr);
    EXPECT_EQ(linkGbpsHint(0), 0);
  }
  for (const char* bad : {"fast", "-3", "0", "0-1:x"}) {
    test::EnvGuard e("HETCCL_LINK_GBPS", bad);
    EXPECT_HETCCL_ERROR(linkGbpsHint(0), hetcclInvalidArgument, "HETCCL_LINK_GBPS");
  }
  BorderCut size;
  EXPECT_EQ(size.describe(), "border cut: size (equal shards)");
  BorderCut bw{"bandwidth", "probe", {1, 4}, {20, 20}, {4, 16}};
  EXPECT_EQ(bw.describe(),
            "border cut: bandwidth (rates from probe): rank 0 1 Gb/s weight 4/16, rank 1 4 Gb/s weight 16/16");
}

}  // namespace
// The device border relay's requests: reads joined where one goes on from
// another, a read again not added twice, a flag alone, too many ranges
// refused as the call is enqueued.
TEST(BorderRelay, RequestsJoinReadsAndRefuseTooMany) {
  BorderRelay::Request r;
  BorderRelay::addRange(r, false, 4096, 100);
  BorderRelay::addRange(r, false, 4196, 50);  // goes on from the first
  BorderRelay::addRange(r, false, 4100, 10);  // inside it
  BorderRelay::addRange(r, true, 8192, 0);    // the done flag alone
  EXPECT_EQ(r.count[0], 1u);
  EXPECT_EQ(r.ranges[0][0].off, 4096u);
  EXPECT_EQ(r.ranges[0][0].len, 150u);
  EXPECT_EQ(r.count[1], 0u);
  EXPECT_EQ(r.flags, 3u);
  for (int i = 1; i < BorderRelay::kMaxRanges; ++i) BorderRelay::addRange(r, false, 100000u * (i + 1), 8);
  EXPECT_EQ(r.count[0], static_cast<uint32_t>(BorderRelay::kMaxRanges));
  EXPECT_THROW(BorderRelay::addRange(r, false, 9000000, 8), Error);
}

// A peer's request is served only within this rank's border data: every
// way a hostile or confused peer could ask for other memory is named.
TEST(BorderRelay, RequestsOutsideTheBorderDataAreRefused) {
  const uint64_t lo = 4096, hi = 1 << 20;
  BorderRelay::Request ok;
  ok.seq = 7;
  BorderRelay::addRange(ok, false, lo, 64);
  BorderRelay::addRange(ok, true, hi - 64, 64);
  EXPECT_EQ(BorderRelay::requestError(ok, 7, lo, hi), "");
  EXPECT_NE(BorderRelay::requestError(ok, 8, lo, hi).find("slot use 7"), std::string::npos);
  auto with = [&](uint64_t off, uint64_t len) {
    BorderRelay::Request r;
    r.seq = 7;
    r.flags = 1;
    r.count[0] = 1;
    r.ranges[0][0] = {off, len};
    return BorderRelay::requestError(r, 7, lo, hi);
  };
  EXPECT_NE(with(0, 64).find("outside this rank's border data"), std::string::npos);  // the flags and header
  EXPECT_NE(with(hi - 63, 64).find("outside"), std::string::npos);                    // past the end
  EXPECT_NE(with(lo, ~uint64_t{0}).find("outside"), std::string::npos);               // wraps around
  EXPECT_NE(with(~uint64_t{0} - 10, 20).find("outside"), std::string::npos);
  EXPECT_EQ(with(hi, 0), "");  // nothing at the end
  BorderRelay::Request many = ok;
  many.count[0] = BorderRelay::kMaxRanges + 1;
  EXPECT_NE(BorderRelay::requestError(many, 7, lo, hi).find("ranges"), std::string::npos);
  BorderRelay::Request noFlag;
  noFlag.seq = 7;
  noFlag.count[1] = 1;
  noFlag.ranges[1][0] = {lo, 8};
  EXPECT_NE(BorderRelay::requestError(noFlag, 7, lo, hi).find("without its flag"), std::string::npos);
}

// The size check of send/recv on one host: each end's log of its messages
// against the other's (border/pair_links.h).
TEST(PairLog, EachEndSeesTheOthersSizeOfTheSameMessage) {
  PairLog sender{}, receiver{};
  EXPECT_FALSE(pairLogCheck(&sender, &receiver, true, 1, 4096).has_value());  // the receiver has not come yet
  EXPECT_EQ(pairLogCheck(&receiver, &sender, false, 1, 4096), 4096u);         // it sees the send: the same size
  EXPECT_FALSE(pairLogCheck(&sender, &receiver, true, 2, 262144).has_value());
  EXPECT_EQ(pairLogCheck(&receiver, &sender, false, 2, 131072), 262144u);  // the caller compares: a mismatch
  // Directions are apart: the receiver's sends are not the sender's receives.
  EXPECT_FALSE(pairLogCheck(&receiver, &sender, true, 1, 8).has_value());
  // A peer more than kMsgs messages ahead overwrote the entry: unchecked,
  // never a wrong answer.
  for (uint64_t n = 3; n <= 2 + PairLog::kMsgs + 1; ++n) pairLogCheck(&sender, &receiver, true, n, n);
  EXPECT_FALSE(pairLogCheck(&receiver, &sender, false, 3, 1).has_value());
  EXPECT_EQ(pairLogCheck(&receiver, &sender, false, 2 + PairLog::kMsgs + 1, 7), 2u + PairLog::kMsgs + 1);
}

// Two ends logging the same message at once: at least one of them sees
// the other's entry (each writes first and reads second), so a mismatch
// is never missed by both.
TEST(PairLog, OfTwoEndsAtOnceOneSeesTheOther) {
  PairLog a{}, b{};
  constexpr int kRounds = 20000;
  std::atomic<int> go{0}, done{0};
  std::vector<uint8_t> sawA(kRounds), sawB(kRounds);
  std::thread other([&] {
    for (int i = 1; i <= kRounds; ++i) {
      while (go.load() < i) std::this_thread::yield();
      sawB[i - 1] = pairLogCheck(&b, &a, false, static_cast<uint64_t>(i), 64).has_value();
      done.fetch_add(1);
    }
  });
  for (int i = 1; i <= kRounds; ++i) {
    go.store(i);
    sawA[i - 1] = pairLogCheck(&a, &b, true, static_cast<uint64_t>(i), 64).has_value();
    while (done.load() < i) std::this_thread::yield();
  }
  other.join();
  int neither = 0, both = 0;
  for (int i = 0; i < kRounds; ++i) {
    neither += !sawA[i] && !sawB[i];
    both += sawA[i] && sawB[i];
  }
  EXPECT_EQ(neither, 0);
  RecordProperty("both", both);
}

// The pair relay's rounds: both ends compute the parts that move from the
// two statuses alike; lengths must agree part by part, so a peer can never
// make this rank receive more than the part its own receive posted.
TEST(PairRelay, RoundsMoveWhatBothEndsAgreeOn) {
  auto side = [](uint64_t base, std::initializer_list<std::pair<uint32_t, uint64_t>> parts) {
    PairRelay::Side s;
    s.upTo = base;
    for (const auto& [len, msg] : parts) {
      s.lens[s.upTo - base] = len;
      s.msgs[s.upTo - base] = msg;
      ++s.upTo;
    }
    return s;
  };
  // Three parts filled, two with room: two move.
  EXPECT_EQ(PairRelay::agree(5, side(5, {{64, 160}, {64, 160}, {32, 160}}), side(5, {{64, 160}, {64, 160}}), "x"), 7u);
  // Nothing filled, or no receive posted: nothing moves.
  EXPECT_EQ(PairRelay::agree(5, side(5, {}), side(5, {{64, 160}}), "x"), 5u);
  EXPECT_EQ(PairRelay::agree(5, side(5, {{64, 160}}), side(5, {}), "x"), 5u);
  // A send of 160 bytes meets a receive of 96: both sizes named.
  try {
    PairRelay::agree(0, side(0, {{64, 160}}), side(0, {{64, 96}}), "to rank 3");
    ADD_FAILURE() << "a mismatched size moved";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), hetcclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("to rank 3: a send of 160 bytes meets a receive of 96 bytes"),
              std::string::npos)
        << e.what();
  }
  // A part longer than the receive's own part (a confused or hostile peer).
  EXPECT_THROW(PairRelay::agree(0, side(0, {{1u << 30, 160}}), side(0, {{64, 160}}), "x"), Error);
  // Statuses out of step: behind what moved, or past the slots.
  PairRelay::Side behind = side(4, {});
  behind.upTo = 3;
  EXPECT_THROW(PairRelay::agree(4, behind, side(4, {{8, 8}}), "x"), Error);
  PairRelay::Side ahead = side(0, {{8, 8}, {8, 8}, {8, 8}, {8, 8}});
  PairRelay::Side ahead2 = ahead;
  ahead.upTo = ahead2.upTo = 5;
  EXPECT_THROW(PairRelay::agree(0, ahead, ahead2, "x"), Error);
}

// HETCCL_AUTO_INTER: the first transport that fits every rank, in the
// order given; tcp where none does; the reason names the rank that ruled
// each earlier one out.
TEST(AutoInter, PicksTheFirstThatFitsEveryRank) {
  const std::vector<std::string> order = parseAutoInter("ucx,ofi,tcp");
  ASSERT_EQ(order, (std::vector<std::string>{"ucx", "ofi", "tcp"}));
  const InterFacts both{true, true}, ucxOnly{true, false}, ofiOnly{false, true}, none{false, false};
  EXPECT_EQ(pickInter(order, {both, both}).name, "ucx");
  InterChoice c = pickInter(order, {both, ofiOnly, both});
  EXPECT_EQ(c.name, "ofi");
  EXPECT_NE(c.reason.find("not ucx: rank 1"), std::string::npos) << c.reason;
  c = pickInter(order, {ofiOnly, ucxOnly});
  EXPECT_EQ(c.name, "tcp");
  EXPECT_NE(c.reason.find("not ofi: rank 1"), std::string::npos) << c.reason;
  EXPECT_EQ(pickInter(parseAutoInter("OFI,ucx"), {both, both}).name, "ofi");
  EXPECT_EQ(pickInter(parseAutoInter("tcp,ucx"), {both}).name, "tcp");
  c = pickInter(parseAutoInter("ucx"), {none});
  EXPECT_EQ(c.name, "tcp");
  EXPECT_NE(c.reason.find("none of HETCCL_AUTO_INTER"), std::string::npos) << c.reason;
}

TEST(AutoInter, BadListsAreNamed) {
  for (const char* bad : {"", "ucx,,tcp", "ucx,shm", "rdma", "tcp,tcp", "ucx,"}) {
    try {
      parseAutoInter(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), hetcclInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("HETCCL_AUTO_INTER='" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace hetccl
