// Rank, size and rendezvous address from a launcher's environment.
#pragma once

#include <string>
#include <utility>

#include "bootstrap/unique_id.h"

namespace hetccl {

struct LaunchInfo {
  std::string launcher;  // "torchrun", "openmpi", "slurm", "hetccl"
  int rank = -1;
  int nranks = 0;
  int localRank = -1;
  SockAddr root;  // where rank 0 runs the rendezvous root
  uint64_t jobId = 0;
  Secret secret{};
  bool weakSecret = true;  // derived from public job facts, not HETCCL_JOB_SECRET
};

// Throws InvalidUsage naming the variables it looked for when no launcher
// (or no rendezvous address) is found.
LaunchInfo detectLauncher();

// This process's rank and the job's size as its launcher numbers them
// (RANK/WORLD_SIZE, Open MPI's, Slurm's), or {-1, 0} where none says.
std::pair<int, int> launcherRank();

// The first line of a secret file, which must be a regular file of this
// user that no one else may read or write, with at least 16 characters.
// Throws InvalidUsage saying what is wrong with it.
std::string readSecretFile(const std::string& path);

}  // namespace hetccl
