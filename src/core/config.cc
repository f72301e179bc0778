#include "core/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace hetccl {
namespace {

// Never destroyed: a detached rendezvous thread may still log (and so read
// settings) while the process exits.
const std::vector<VarSpec>& table() {
  static const auto* vars = new std::vector<VarSpec>{
    {"HETCCL_DEBUG", VarType::kString, "", "NCCL_DEBUG", "log level: WARN, INFO or TRACE (unset: silent)"},
    {"HETCCL_DEBUG_SUBSYS", VarType::kString, "ALL", nullptr,
     "subsystems to log: comma list of INIT,BOOTSTRAP,TOPO,TRANSPORT,BACKEND,COLL,DEVICE; ^ negates"},
    {"HETCCL_TIMEOUT_S", VarType::kInt, "300", nullptr,
     "seconds a wait may go without progress before it fails with a remote error naming the peer"},
    {"HETCCL_TRANSPORT", VarType::kString, "auto", nullptr,
     "border and host-group transport: auto (one host: shm; else ucx where every rank has UCX and an RDMA device, else tcp), shm, tcp, ucx"},
    {"HETCCL_GROUP", VarType::kString, "", nullptr,
     "this rank's group name (default: its device kind: host, cuda, hip)"},
    {"HETCCL_GROUP_MAP", VarType::kString, "", nullptr,
     "group names by global rank, e.g. 0-1:a,2-3:b; for launchers that give every rank one environment"},
    {"HETCCL_COMM_ID", VarType::kString, "", nullptr,
     "host:port of the rendezvous root for hetcclCommInitFromEnv (default MASTER_ADDR:MASTER_PORT+1)"},
    {"HETCCL_JOB_SECRET", VarType::kString, "", nullptr,
     "job secret for hetcclCommInitFromEnv; unset: derived from the launcher's job id (weak)"},
    {"HETCCL_SOCKET_IFNAME", VarType::kString, "", "NCCL_SOCKET_IFNAME",
     "network interface (prefix) whose address the TCP listeners use; default: the host name's address"},
    {"HETCCL_BUFFSIZE", VarType::kBytes, "4M", nullptr,
     "staging memory per communicator per peer connection (TCP receive staging, shm ring size)"},
    {"HETCCL_SHM_SLOT_BYTES", VarType::kBytes, "256K", nullptr, "shm ring slot size; HETCCL_BUFFSIZE/slot = slots"},
    {"HETCCL_SHM_CMA", VarType::kBool, "1", nullptr,
     "shm: read messages larger than a slot straight from the sender's memory (process_vm_readv) when permitted"},
    {"HETCCL_HOST_THREADS", VarType::kInt, "0", nullptr,
     "threads a rank uses to read and fold large messages of peers on its host (shm single-copy reads); "
     "0: the usable cores divided by the ranks on this host, 1 to 8"},
    {"HETCCL_SPIN_US", VarType::kInt, "300", nullptr,
     "microseconds a waiting rank spins before it sleeps on a futex or poll"},
    {"HETCCL_CHUNK_BYTES", VarType::kBytes, "0", nullptr,
     "AllReduce across groups larger than this runs as chunks of this size, one after another (GPU ranks copy "
     "chunk k+1 in and chunk k-1 out while chunk k crosses the border); 0: one piece (measured faster on one host); "
     "every rank must set the same"},
    {"HETCCL_SMALL_BYTES", VarType::kBytes, "64K", nullptr,
     "AllReduce below this size: group AllReduce plus one direct border exchange (latency plan)"},
    {"HETCCL_CHECK_MISMATCH", VarType::kBool, "0", nullptr,
     "compare every collective call across all ranks before it runs (one small allgather per call); "
     "border messages are always checked"},
    {"HETCCL_DEVICE", VarType::kString, "host", nullptr,
     "this rank's device kind: host (CPU memory), cuda or hip (the calling thread's current GPU)"},
    {"HETCCL_BACKEND", VarType::kString, "", nullptr,
     "group backend (default by device kind: host -> host, cuda -> nccl, hip -> rccl)"},
    {"HETCCL_CUDA_LIB", VarType::kString, "", nullptr,
     "path of the CUDA runtime to load (default: libcudart.so.13, .12, then libcudart.so)"},
    {"HETCCL_HIP_LIB", VarType::kString, "", nullptr, "path of the HIP runtime to load (default: libamdhip64.so)"},
    {"HETCCL_NCCL_LIB", VarType::kString, "", nullptr,
     "path of the NCCL library the nccl backend loads (default: libnccl.so.2 from the loader's search path, "
     "then /usr/local/cuda/lib64, then beside a loaded CUDA runtime)"},
    {"HETCCL_RCCL_LIB", VarType::kString, "", nullptr, "path of the RCCL library the rccl backend loads"},
    {"HETCCL_UCX_LIB", VarType::kString, "", nullptr,
     "path of UCX's libucp the ucx transport loads (default: libucp.so.0); UCX_TLS, UCX_NET_DEVICES pass through"},
    {"HETCCL_UCX_RMA_MIN", VarType::kBytes, "0", nullptr,
     "ucx transport: plain receives of this size and up take the payload by RMA put into their registered buffer "
     "(0: never, tagged parts only; every rank must set the same)"},
    {"HETCCL_KERNELS_LIB", VarType::kString, "", nullptr,
     "path of the device reduction kernels plugin (default: libhetccl-<kind>-kernels.so beside libhetccl)"},
    {"HETCCL_GPU_DIRECT", VarType::kString, "auto", nullptr,
     "GPU ranks' AllReduce, Broadcast and AllGather across groups: hand device memory straight to the transport "
     "(the direct path; the calling thread waits for the call) where it reports that memory type (ucx built "
     "with CUDA/ROCm) and the kernels plugin loads. auto: only where no group holds host memory and either all "
     "ranks share a host and every group is of this rank's device kind, or a GPU peer-memory module (GPUDirect "
     "RDMA) is loaded, for calls of HETCCL_GPU_DIRECT_MIN and "
     "up; 1: every such call (init fails naming why it cannot); 0: always stage through pinned memory"},
    {"HETCCL_GPU_DIRECT_MIN", VarType::kBytes, "16M", nullptr,
     "HETCCL_GPU_DIRECT=auto: smallest call (AllReduce/Broadcast bytes, AllGather output bytes) that goes "
     "direct; smaller ones stage"},
    {"HETCCL_PLAN_FOLDS", VarType::kBool, "0", nullptr,
     "host ranks fold border data after receiving it whole, as GPU ranks on the direct path do, instead of in "
     "the transport as it arrives (a test setting: it runs the direct path's plan on CPUs)"},
    {"HETCCL_STAGING_MAX", VarType::kBytes, "2G", nullptr,
     "GPU ranks: most pinned host memory one communicator keeps for staging border data"},
    {"HETCCL_SOCKET_BUFFER", VarType::kBytes, "4M", nullptr, "SO_SNDBUF/SO_RCVBUF of TCP transport sockets"},
  };
  return *vars;
}

const char* rawEnv(const VarSpec& v) {
  const char* val = getenv(v.name);
  if ((!val || !*val) && v.fallback) val = getenv(v.fallback);
  return (val && *val) ? val : nullptr;
}

}  // namespace

const Config& config() {
  static Config c;
  return c;
}

const std::vector<VarSpec>& Config::vars() const { return table(); }

const VarSpec& Config::spec(const char* name) const {
  for (const auto& v : table())
    if (strcmp(v.name, name) == 0) return v;
  throwError(hetcclInternalError, std::string("setting not in the registry: ") + name);
}

std::string Config::getString(const char* name) const {
  const VarSpec& v = spec(name);
  const char* val = rawEnv(v);
  return val ? val : v.defaultValue;
}

bool Config::isSet(const char* name) const { return rawEnv(spec(name)) != nullptr; }

int64_t Config::getInt(const char* name) const { return parseInt(getString(name), name); }

uint64_t Config::getBytes(const char* name) const { return parseBytes(getString(name), name); }

bool Config::getBool(const char* name) const {
  std::string s = getString(name);
  return !(s.empty() || s == "0" || strcasecmp(s.c_str(), "false") == 0 || strcasecmp(s.c_str(), "no") == 0);
}

int64_t parseInt(const std::string& text, const char* what) {
  if (text.empty() || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
    throwError(hetcclInvalidArgument, std::string(what) + ": not an integer: '" + text + "'");
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0')
    throwError(hetcclInvalidArgument, std::string(what) + ": not an integer: '" + text + "'");
  return v;
}

uint64_t parseBytes(const std::string& text, const char* what) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || text[0] == '-')
    throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || (v != 0 && mult > UINT64_MAX / v))
    throwError(hetcclInvalidArgument, std::string(what) + ": not a size: '" + text + "'");
  return v * mult;
}

}  // namespace hetccl
