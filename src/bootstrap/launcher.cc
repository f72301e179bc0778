#include "bootstrap/launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

std::pair<int, int> launcherRank() {
  const char* pairs[][2] = {
      {"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& p : pairs)
    if (env(p[0]) && env(p[1])) return {envInt(p[0]), envInt(p[1])};
  return {-1, 0};
}

std::string readSecretFile(const std::string& path) {
  const std::string what = "HETCCL_JOB_SECRET_FILE '" + path + "'";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throwSystemError(what, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throwSystemError(what, e);
  }
  std::string problem;
  if (!S_ISREG(st.st_mode))
    problem = "is not a regular file";
  else if (st.st_uid != geteuid())
    problem = "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  else if (st.st_mode & (S_IRWXG | S_IRWXO))
    problem = "may be read or written by others (mode " + std::to_string((st.st_mode >> 6) & 7) +
              std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) + "; chmod 600 it)";
  else if (st.st_size > 4096)
    problem = "is larger than 4 KiB";
  std::string text(static_cast<size_t>(problem.empty() ? st.st_size : 0), '\0');
  ssize_t got = text.empty() ? 0 : ::read(fd, text.data(), text.size());
  int e = errno;
  ::close(fd);
  if (!problem.empty()) throwError(hetcclInvalidUsage, what + " " + problem);
  if (got < 0) throwSystemError(what, e);
  text.resize(static_cast<size_t>(got));
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.size() < 16)
    throwError(hetcclInvalidUsage, what + " holds " + std::to_string(text.size()) +
                                       " characters on its first line; a secret needs at least 16");
  return text;
}

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
  if (secret.empty() && settings::kJobSecretFile.isSet()) secret = readSecretFile(settings::kJobSecretFile.get());
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
