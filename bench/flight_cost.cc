// hetccl-flight-cost: what the flight recorder and the metrics counters cost
// a call, measured in one job. Every rank holds two communicators over the
// same ranks: the one it was launched with (recorder and counters as the
// environment sets them, on by default) and a split of it made with
// HETCCL_FLIGHT_RECORDER=0 and HETCCL_METRICS=0. Rounds alternate between
// the two (off first in odd rounds, on first in even ones), so both sides
// run in the same processes, on the same cores and through the same kind of
// connections: what differs between the sides is the recording alone. Runs
// in separate processes differ by where the kernel placed the ranks, which
// at 8 B moves a call by more than the recorder costs.
//
//   hetccl-flight-cost [hetccl-perf options] [--rounds R]
// Prints per size (out of place, the best round of each side):
//   ratio flight_recorder+metrics <bytes> off_us=.. on_us=.. on/off=.. added_us=..
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "options.h"

namespace {

int costRank(const perf::Options& o, int rounds, hetcclComm_t on) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  perf::checkResult(hetcclCommGetInfo(on, &info), "hetcclCommGetInfo", on);
  // The split reads the settings when it is made: every rank sets the same.
  setenv("HETCCL_FLIGHT_RECORDER", "0", 1);
  setenv("HETCCL_METRICS", "0", 1);
  hetcclComm_t off = nullptr;
  perf::checkResult(hetcclCommSplit(on, 0, info.rank, &off, nullptr), "hetcclCommSplit", on);
  perf::Bench benchOn(o, on, info.rank, info.nranks), benchOff(o, off, info.rank, info.nranks);
  const std::vector<size_t> sizes = perf::sizeList(o);
  for (perf::Bench* b : {&benchOff, &benchOn}) {
    b->warmup(sizes.back());
    b->warmup(sizes.front());
  }
  int code = perf::kExitOk;
  for (size_t bytes : sizes) {
    double best[2] = {1e300, 1e300};  // off, on
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        const int side = (r % 2 == 0) ? k : 1 - k;
        const perf::Row row = (side ? benchOn : benchOff).measure(bytes);
        if (row.oop.wrong > 0 || row.ip.wrong > 0) code = perf::kExitWrong;
        if (row.oop.timeUs < best[side]) best[side] = row.oop.timeUs;
      }
    }
    if (info.rank == 0)
      printf("ratio flight_recorder+metrics %zu off_us=%.3f on_us=%.3f on/off=%.4f added_us=%.3f\n", bytes, best[0],
             best[1], best[1] / best[0], best[1] - best[0]);
    fflush(stdout);
  }
  perf::checkResult(hetcclCommDestroy(off), "hetcclCommDestroy", on);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 9;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = atoi(argv[++i]);
      continue;
    }
    rest.push_back(argv[i]);
  }
  if (rounds < 1) {
    fprintf(stderr, "hetccl-flight-cost: --rounds must be at least 1\n");
    return perf::kExitUsage;
  }
  const perf::Options o = perf::parseOptions(static_cast<int>(rest.size()), rest.data());
  auto body = [&o, rounds](hetcclComm_t comm) { return costRank(o, rounds, comm); };
  return o.np > 0 ? perf::launchLocal(o, body) : perf::launchFromEnv(o, body);
}
