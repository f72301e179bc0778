#include "bootstrap/launcher.h"

#include <cstdlib>
#include <cstring>

#include "core/settings.h"
#include "core/error.h"

namespace hetccl {
namespace {

const char* env(const char* name) {
  const char* v = getenv(name);
  return (v && *v) ? v : nullptr;
}

int envInt(const char* name) { return static_cast<int>(parseInt(env(name), name)); }

}  // namespace

LaunchInfo detectLauncher() {
  LaunchInfo li;
  if (env("RANK") && env("WORLD_SIZE")) {
    li.launcher = "torchrun";
    li.rank = envInt("RANK");
    li.nranks = envInt("WORLD_SIZE");
    if (env("LOCAL_RANK")) li.localRank = envInt("LOCAL_RANK");
  } else if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    li.launcher = "openmpi";
    li.rank = envInt("OMPI_COMM_WORLD_RANK");
    li.nranks = envInt("OMPI_COMM_WORLD_SIZE");
    if (env("OMPI_COMM_WORLD_LOCAL_RANK")) li.localRank = envInt("OMPI_COMM_WORLD_LOCAL_RANK");
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    li.launcher = "slurm";
    li.rank = envInt("SLURM_PROCID");
    li.nranks = envInt("SLURM_NTASKS");
    if (env("SLURM_LOCALID")) li.localRank = envInt("SLURM_LOCALID");
  } else {
    throwError(hetcclInvalidUsage,
               "no launcher found (looked for RANK/WORLD_SIZE, "
               "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS)");
  }
  if (li.nranks <= 0 || li.rank < 0 || li.rank >= li.nranks)
    throwError(hetcclInvalidArgument, li.launcher + ": rank " + std::to_string(li.rank) + " of " +
                                          std::to_string(li.nranks) + " is out of range");

  // Facts every rank of the job sees alike: they name the job.
  std::string job = li.launcher + "/" + std::to_string(li.nranks);
  for (const char* v : {"TORCHELASTIC_RUN_ID", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "SLURM_JOB_ID",
                        "SLURM_STEP_ID", "MASTER_ADDR", "MASTER_PORT", "HETCCL_COMM_ID"})
    if (env(v)) job += std::string("/") + v + "=" + env(v);

  if (settings::kCommId.isSet()) {
    li.root = SockAddr::parse(settings::kCommId.get());
  } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
    // torchrun's own store listens on MASTER_PORT: the root takes the next one.
    int port = envInt("MASTER_PORT") + 1;
    li.root = SockAddr::parse(std::string(env("MASTER_ADDR")) + ":" + std::to_string(port));
  } else if (li.launcher == "openmpi" && env("OMPI_COMM_WORLD_LOCAL_SIZE") &&
             envInt("OMPI_COMM_WORLD_LOCAL_SIZE") == li.nranks) {
    // All ranks on this host: a port derived from the job.
    const uint8_t key[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 'p', 'o', 'r', 't'};
    uint64_t h = sipHash24(key, job.data(), job.size());
    li.root = SockAddr::parse("127.0.0.1:" + std::to_string(20000 + h % 20000));
  } else {
    throwError(hetcclInvalidUsage, "under " + li.launcher +
                                       ": set HETCCL_COMM_ID=host:port (rank 0's host) or MASTER_ADDR and MASTER_PORT");
  }

  std::string secret = settings::kJobSecret.get();
  li.weakSecret = secret.empty();
  if (secret.empty()) secret = job;
  const uint8_t k1[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 's', '1'};
  const uint8_t k2[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 's', '2'};
  const uint8_t k3[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 's', '3'};
  const uint8_t k4[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 's', '4'};
  const uint8_t* keys[] = {k1, k2, k3, k4};
  for (int i = 0; i < 4; ++i) {
    uint64_t w = sipHash24(keys[i], secret.data(), secret.size());
    memcpy(li.secret.data() + 8 * i, &w, 8);
  }
  const uint8_t kj[16] = {'h', 'e', 't', 'c', 'c', 'l', '-', 'j', 'o', 'b'};
  li.jobId = sipHash24(kj, job.data(), job.size());
  return li;
}

}  // namespace hetccl
