// Reading the flight recorder's dumps in the multi-process tests: a rank
// asks for its own dump (SIGUSR1, with HETCCL_FLIGHT_DIR set) and reads
// the records back.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "command_output.h"
#include "harness.h"

namespace hmp {

// Rank `rank`'s dumps in dir, concatenated. nranks: only the communicator
// of that size (an emulated vendor library's own communicators of a group
// dump there too), or 0 for any.
inline std::string readDump(const std::string& dir, int rank, int nranks = 0) {
  const std::string files = dir + "/*-rank" + std::to_string(rank) + ".json";
  const std::string cmd =
      nranks ? "grep -l '\"nranks\": " + std::to_string(nranks) + ",' " + files + " 2>/dev/null | xargs -r cat"
             : "cat " + files + " 2>/dev/null";
  return hetccl_test::commandOutput(cmd);
}

inline size_t countOf(const std::string& text, const std::string& what) {
  size_t k = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++k;
  return k;
}

// The rank's dump (in HETCCL_FLIGHT_DIR) once it shows `calls` completed
// calls: it asks for one by SIGUSR1 (written by a thread of its own) until
// the recorder has got that far (5 s).
inline std::string dumpOnceCompleted(Rank& r, size_t calls, int nranks) {
  const std::string d = getenv("HETCCL_FLIGHT_DIR");
  std::string text;
  for (int i = 0; i < 100 && countOf(text, "\"completed\"") < calls; ++i) {
    raise(SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = readDump(d, r.rank, nranks);
  }
  return text;
}

// One record of a dump: what the step tests read.
struct FlightRec {
  std::string coll, op, state;
  double start = 0, end = 0, group = 0, border = 0;
};

inline std::vector<FlightRec> parseRecords(const std::string& text) {
  static const std::regex one(
      "\"coll\": \"(\\w+)\".*?\"op\": \"(\\w+)\".*?\"state\": \"(\\w+)\".*?\"start_us\": ([0-9.]+), \"end_us\": "
      "([0-9.]+), \"group_us\": ([0-9.]+), \"border_us\": ([0-9.]+)");
  std::vector<FlightRec> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), one); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.push_back({m[1], m[2], m[3], std::stod(m[4]), std::stod(m[5]), std::stod(m[6]), std::stod(m[7])});
  }
  return out;
}

}  // namespace hmp
