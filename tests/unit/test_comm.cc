// The communicator layer's parts that stand alone: the flight recorder.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "comm/flight_recorder.h"

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
  f.finish(1, 1, hetcclSuccess);  // overwritten since: nothing happens
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

}  // namespace
}  // namespace hetccl
