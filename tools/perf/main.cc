// hetccl-perf: nccl-tests style bandwidth and correctness measurement of the
// hetccl collectives. hetccl-perf -h lists the options.
#include <cstdio>
#include <vector>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "options.h"
#include "report.h"

namespace {

int benchRank(const perf::Options& o, hetcclComm_t comm) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  perf::checkResult(hetcclCommGetInfo(comm, &info), "hetcclCommGetInfo", comm);
  if (perf::collRooted(o.coll) && o.root >= info.nranks) {
    if (info.rank == 0) fprintf(stderr, "hetccl-perf: -R %d is not a rank of this job of %d\n", o.root, info.nranks);
    return perf::kExitUsage;
  }
  perf::Report report(o, info, info.rank == 0);
  perf::Bench bench(o, comm, info.rank, info.nranks);
  report.header();
  const std::vector<size_t> sizes = perf::sizeList(o);
  bench.warmup(sizes.back());
  bench.warmup(sizes.front());
  for (size_t bytes : sizes) report.row(bench.measure(bytes));
  report.footer();
  int code = report.totalWrong() > 0 ? perf::kExitWrong : perf::kExitOk;
  if (info.rank == 0 && !o.jsonPath.empty() && !report.writeJson(o.jsonPath)) code = perf::kExitError;
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const perf::Options o = perf::parseOptions(argc, argv);
  auto body = [&o](hetcclComm_t comm) { return benchRank(o, comm); };
  return o.np > 0 ? perf::launchLocal(o, body) : perf::launchFromEnv(o, body);
}
