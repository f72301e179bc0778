// Starting the ranks: forked locally (--np) or one per process under a
// launcher (torchrun, mpirun, srun) through hetcclCommInitFromEnv.
#ifndef HETCCL_TOOLS_PERF_LAUNCH_H_
#define HETCCL_TOOLS_PERF_LAUNCH_H_

#include <functional>

#include "options.h"

namespace perf {

enum ExitCode { kExitOk = 0, kExitWrong = 1, kExitUsage = 2, kExitError = 3, kExitTimeout = 4 };

// The work of one rank on its communicator; returns the rank's exit code and
// throws on library errors (the launcher then aborts the communicator).
using RankBody = std::function<int(hetcclComm_t comm)>;

// --np: the parent makes the unique id and forks one child per rank, then
// waits for all. A rank that fails (other than by finding wrong results) gets
// the others killed; so does the --timeout deadline. Returns the exit code.
int launchLocal(const Options& o, const RankBody& body);

// This process is one rank of a launcher's job.
int launchFromEnv(const Options& o, const RankBody& body);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_LAUNCH_H_
