// Every HETCCL_* setting: type, default, fallback, meaning, allowed values.
// The handles in settings.h name these entries; hetccl-info prints them.
#include "core/config.h"

namespace hetccl {

// Never destroyed: a detached rendezvous thread may still log (and so read
// settings) while the process exits.
const std::vector<VarSpec>& settingsTable() {
  constexpr int64_t kTiB = int64_t{1} << 40;
  static const auto* vars = new std::vector<VarSpec>{
      {"HETCCL_DEBUG", VarType::kChoice, "", "NCCL_DEBUG",
       "log level: WARN, INFO or TRACE (unset: silent; NCCL_DEBUG=VERSION counts as WARN)", 0, 0,
       "|WARN|INFO|TRACE|VERSION"},
      {"HETCCL_DEBUG_SUBSYS", VarType::kString, "ALL", nullptr,
       "subsystems to log: comma list of INIT,BOOTSTRAP,TOPO,TRANSPORT,BACKEND,COLL,DEVICE; ^ negates"},
      {"HETCCL_TIMEOUT_S", VarType::kInt, "300", nullptr,
       "seconds a wait may go without progress before it fails with a remote error naming the peer", 1, 31536000},
      {"HETCCL_TRANSPORT", VarType::kString, "auto", nullptr,
       "border and host-group transport, per link class: intra=<auto|shm|tcp|ucx|ofi|net>,inter=<auto|tcp|ucx|ofi|net> "
       "(intra: peers on this host, auto shm; inter: peers on other hosts, auto the first of HETCCL_AUTO_INTER that "
       "fits every rank; net, an NCCL net plugin's links, only when named); or one of auto, shm, tcp, ucx, ofi, net "
       "for every link (shm: every rank on one host)"},
      {"HETCCL_AUTO_INTER", VarType::kString, "ucx,ofi,tcp", nullptr,
       "the order in which HETCCL_TRANSPORT=auto tries transports between hosts, a comma list of ucx, ofi, tcp: ucx "
       "fits where every rank has UCX and an RDMA device, ofi where every rank's libfabric offers a reliable tagged "
       "provider other than tcp, sockets, udp, shm and net, tcp always (and is taken where none fits); every rank "
       "must set the same"},
      {"HETCCL_GROUP", VarType::kString, "", nullptr,
       "this rank's group name (default: its device kind: host, cuda, hip)"},
      {"HETCCL_GROUP_MAP", VarType::kString, "", nullptr,
       "group names by global rank, e.g. 0-1:a,2-3:b, naming every rank once; for launchers that give every rank "
       "one environment (every rank must see the same map)"},
      {"HETCCL_COMM_ID", VarType::kString, "", nullptr,
       "host:port of the rendezvous root for hetcclCommInitFromEnv (default MASTER_ADDR:MASTER_PORT+1)"},
      {"HETCCL_JOB_SECRET", VarType::kString, "", nullptr,
       "job secret for hetcclCommInitFromEnv; unset: HETCCL_JOB_SECRET_FILE's, else derived from the launcher's job "
       "id (weak: refused where a link is encrypted)"},
      {"HETCCL_JOB_SECRET_FILE", VarType::kString, "", nullptr,
       "file holding the job secret for hetcclCommInitFromEnv (its first line); it must belong to this user and be "
       "readable by no one else (chmod 600), else init fails"},
      {"HETCCL_ENCRYPT", VarType::kChoice, "cross-site", nullptr,
       "which tcp, ucx and ofi links carry AES-256-GCM records (keys from the job secret): off, cross-site (links "
       "between "
       "ranks of different HETCCL_SITE; with no sites set, none) or all; same-host shm is never encrypted; every rank "
       "must set the same",
       0, 0, "off|cross-site|all"},
      {"HETCCL_SITE", VarType::kString, "", nullptr,
       "this rank's site (a trust domain: a data centre, a cloud region); links between sites are encrypted under "
       "HETCCL_ENCRYPT=cross-site"},
      {"HETCCL_SITE_MAP", VarType::kString, "", nullptr,
       "sites by rank, e.g. 0-3:onprem,4-7:cloud, naming every rank once (used where HETCCL_SITE is unset): ranks as "
       "the launcher numbers them (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID) where one does, else the communicator's; "
       "communicators made by split and shrink keep their parent's sites"},
      {"HETCCL_ENCRYPT_REKEY_RECORDS", VarType::kInt, "262144", nullptr,
       "records (at most 256 KiB each) one key seals before both ends derive the next (ucx: a new key every this many "
       "/ 16 messages); every rank must set the same",
       1, int64_t{1} << 32},
      {"HETCCL_CRYPTO_LIB", VarType::kString, "libcrypto.so.3", nullptr,
       "path of OpenSSL 3's libcrypto, loaded where a link is encrypted (Debian: libssl3)"},
      {"HETCCL_SOCKET_IFNAME", VarType::kString, "", "NCCL_SOCKET_IFNAME",
       "network interface (prefix) whose address the TCP listeners use; default: the host name's address"},
      {"HETCCL_BUFFSIZE", VarType::kBytes, "4M", nullptr,
       "staging memory per communicator per peer connection (TCP receive staging; the shm ring size, which "
       "HETCCL_SHM_MAX bounds)",
       4096, int64_t{1} << 30},
      {"HETCCL_SHM_SLOT_BYTES", VarType::kBytes, "256K", nullptr,
       "shm ring slot size; HETCCL_BUFFSIZE/slot = slots (2 to 1024)", 4096, int64_t{64} << 20},
      {"HETCCL_SHM_MAX", VarType::kBytes, "1G", nullptr,
       "most shared memory one communicator's shm rings take on one host, all its ranks there together: "
       "n x (n - 1) rings for n ranks on the host. Rings are HETCCL_BUFFSIZE each; where that is unset and they would "
       "not fit, smaller (down to 2 slots); init fails naming this setting where even those do not fit or where an "
       "explicit HETCCL_BUFFSIZE does not",
       int64_t{1} << 20, kTiB},
      {"HETCCL_SHM_CMA", VarType::kBool, "1", nullptr,
       "shm: read messages larger than a slot straight from the sender's memory (process_vm_readv) when permitted"},
      {"HETCCL_HOST_THREADS", VarType::kInt, "0", nullptr,
       "threads a rank uses to read and fold large messages of peers on its host (shm single-copy reads) and to "
       "seal and open each encrypted link's records; "
       "0: the usable cores divided by the ranks on this host, at most 8",
       0, 64},
      {"HETCCL_SPIN_US", VarType::kInt, "300", nullptr,
       "microseconds a waiting rank spins before it sleeps on a futex or poll", 0, 1000000},
      {"HETCCL_CHUNK_BYTES", VarType::kBytes, "0", nullptr,
       "AllReduce across groups larger than this runs as chunks of this size, one after another (GPU ranks copy "
       "chunk k+1 in and chunk k-1 out while chunk k crosses the border); 0: one piece (measured faster on one host); "
       "every rank must set the same",
       0, kTiB},
      {"HETCCL_SMALL_BYTES", VarType::kBytes, "64K", nullptr,
       "AllReduce across groups below this size: group AllReduce plus one direct border exchange (latency plan); "
       "unset under HETCCL_BORDER_CUT=bandwidth, the cost model picks it from the measured links; every rank must "
       "set the same",
       0, int64_t{1} << 30},
      {"HETCCL_CHECK_MISMATCH", VarType::kBool, "0", nullptr,
       "compare every collective call across all ranks before it runs (one small allgather per call); "
       "border messages are always checked, and rooted calls check their ring neighbours"},
      {"HETCCL_DEVICE", VarType::kChoice, "host", nullptr,
       "this rank's device kind: host (CPU memory), cuda or hip (the calling thread's current GPU), emu (an emulated "
       "GPU, for tests). Unset: host for the C API and hetccl-perf; cuda for the NCCL drop-in (hip for librccl); "
       "hetccl_torch follows the device of the process's tensors",
       0, 0, "host|cuda|hip|emu"},
      {"HETCCL_BACKEND", VarType::kChoice, "", nullptr,
       "group backend (default by device kind: host -> host, cuda -> nccl, hip -> rccl, emu -> emu-nccl)", 0, 0,
       "|host|nccl|rccl|emu-nccl"},
      {"HETCCL_CUDA_LIB", VarType::kString, "", nullptr,
       "path of the CUDA runtime to load (default: libcudart.so.13, .12, then libcudart.so)"},
      {"HETCCL_HIP_LIB", VarType::kString, "", nullptr, "path of the HIP runtime to load (default: libamdhip64.so)"},
      {"HETCCL_NCCL_LIB", VarType::kString, "", nullptr,
       "path of the NCCL library the nccl backend loads (default: libnccl.so.2 from the loader's search path, "
       "then /usr/local/cuda/lib64, then beside a loaded CUDA runtime)"},
      {"HETCCL_RCCL_LIB", VarType::kString, "", nullptr, "path of the RCCL library the rccl backend loads"},
      {"HETCCL_UCX_LIB", VarType::kString, "libucp.so.0", nullptr,
       "path of UCX's libucp the ucx transport loads; UCX_TLS, UCX_NET_DEVICES pass through"},
      {"HETCCL_OFI_LIB", VarType::kString, "libfabric.so.1", nullptr,
       "path of libfabric the ofi transport loads; FI_* variables (FI_PROVIDER, FI_TCP_IFACE...) pass through"},
      {"HETCCL_OFI_PROVIDER", VarType::kString, "", nullptr,
       "libfabric provider the ofi transport uses, e.g. efa, cxi, tcp, shm (default: libfabric's first reliable "
       "tagged provider, which FI_PROVIDER narrows)"},
      {"HETCCL_OFI_REGISTER", VarType::kBool, "0", nullptr,
       "ofi transport: register every buffer with the provider, also where it does not ask for it (FI_MR_LOCAL "
       "asks, as EFA does); for trying the registration path on providers that do not need it"},
      {"HETCCL_OFI_RMA_MIN", VarType::kBytes, "0", nullptr,
       "ofi transport: plain receives of this size and up take the payload by RMA write into their registered "
       "buffer where every rank's provider offers FI_RMA (0: never, tagged parts only; every rank must set the same)",
       0, kTiB},
      {"HETCCL_UCX_RMA_MIN", VarType::kBytes, "0", nullptr,
       "ucx transport: plain receives of this size and up take the payload by RMA put into their registered buffer "
       "(0: never, tagged parts only; every rank must set the same)",
       0, kTiB},
      {"HETCCL_NET_PLUGIN", VarType::kString, "", "NCCL_NET_PLUGIN",
       "net transport: the NCCL net plugin to load, a path or a name X for libnccl-net-X.so (unset: libnccl-net.so); "
       "every rank must load a plugin whose links reach the others"},
      {"HETCCL_NET_PLUGIN_ABI", VarType::kInt, "0", nullptr,
       "net transport: the newest ncclNetPlugin_vN ABI version to use (8 to 12; 0: the newest the plugin exports)", 0,
       12},
      {"HETCCL_KERNELS_LIB", VarType::kString, "", nullptr,
       "path of the device reduction kernels plugin (default: libhetccl-<kind>-kernels.so beside libhetccl)"},
      {"HETCCL_EMU_LIB", VarType::kString, "", nullptr,
       "path of the emulated GPU's runtime (default: libhetccl-emu.so beside libhetccl, then the loader's path)"},
      {"HETCCL_EMU_NCCL_LIB", VarType::kString, "", nullptr,
       "path of the emulated GPU's group library (default: libhetccl-emu-nccl.so beside libhetccl)"},
      {"HETCCL_EMU_DEVICES", VarType::kInt, "8", nullptr, "emulated GPUs each process sees", 1, 64},
      {"HETCCL_EMU_STALL_US", VarType::kInt, "0", nullptr,
       "emulated GPU: every stream operation starts this late (a slow device, to shake out ordering bugs)", 0, 1000000},
      {"HETCCL_EMU_LAZY_LOADING", VarType::kInt, "0", nullptr,
       "emulated GPU: 1: a kernel's first launch in the process first waits until every stream of the device is "
       "idle (as a GPU runtime loading kernels lazily may), unless the kernels plugin preloaded it; 2: the same, "
       "and preloading is ignored (a synchronising runtime call hetccl does not know of)",
       0, 2},
      {"HETCCL_EMU_COPY_DELAY_US", VarType::kInt, "0", nullptr,
       "emulated GPU: every copy takes this much longer (copies slower than launches)", 0, 1000000},
      {"HETCCL_EMU_FAIL_ALLOC", VarType::kInt, "0", nullptr,
       "emulated GPU: the N-th allocation of the process (device or pinned host memory) fails (0: none)", 0,
       1000000000},
      {"HETCCL_EMU_INIT_DELAY_MS", VarType::kInt, "0", nullptr,
       "emulated GPU's group library: a non-blocking init stays in progress this long (a slow vendor init)", 0,
       10000000},
      {"HETCCL_GPU_BORDER", VarType::kChoice, "auto", nullptr,
       "GPU ranks' collectives (docs/c-api.md lists the few that stage) and send/recv between ranks of different "
       "groups (on other hosts through hetccl's pair relay), across groups through the device border: each group's "
       "vendor library "
       "works inside the group in device memory, and only each rank's share crosses to the other groups, by "
       "the GPUs' copy engines through shared memory registered with every runtime (to peers on other hosts "
       "through a mirror of it that hetccl's relay fills over the inter-host transport), folded by GPU kernels, "
       "in the caller's stream order. auto: where every group holds GPU ranks (of any sizes) and the kernels "
       "plugin loads on every rank; 1: the same, init "
       "fails "
       "naming why "
       "it "
       "cannot; 0: never (staged through pinned memory)",
       0, 0, "auto|0|1"},
      {"HETCCL_GPU_BORDER_CHUNK", VarType::kBytes, "8M", nullptr,
       "device border: bytes of one part of a slice (a slice is one part per group); shared memory per rank is "
       "4 x (groups + 1) parts, device scratch 2 x (groups - 1) parts, and 4 parts of at most 2 MiB for each GPU "
       "rank of another group on this host that is not a border peer (send/recv links); pinned memory of 8 such "
       "parts for each GPU rank of another group on another host it exchanges send/recv with (at the first one); "
       "halved (down to 64 KiB) "
       "until every rank's segments fit in half of the free /dev/shm, the smallest of all ranks' then used by all",
       4096, int64_t{1} << 30},
      {"HETCCL_GPU_BORDER_MIN", VarType::kBytes, "1M", nullptr,
       "device border: smallest call (AllReduce/Broadcast/Reduce/send/recv bytes, "
       "AllGather/ReduceScatter/AlltoAll/Gather/Scatter bytes "
       "of all ranks) that takes it; smaller ones stage through pinned memory, where the CPU relays them. Unset: 0 "
       "(every call), or the default where two ranks share one GPU without MPS (the GPU time-slices their contexts and "
       "each hand-off between them costs more than the relay of a small call: docs/performance.md)",
       0, kTiB},
      {"HETCCL_GPU_BORDER_KERNEL", VarType::kChoice, "auto", nullptr,
       "device border: an AllReduce share of up to 16 KiB (and HETCCL_SMALL_BYTES) crosses in one kernel per rank that "
       "copies its "
       "share out, stores and waits for the flags in shared memory, and folds the peers' shares (2 to 8 groups). auto: "
       "unless two ranks share one GPU without MPS (a waiting kernel would hold the GPU for its time slice); 1: "
       "always; 0: never (copies and stream memory operations)",
       0, 0, "auto|0|1"},
      {"HETCCL_GPU_STREAM_PRIORITY", VarType::kChoice, "high", nullptr,
       "GPU ranks of several groups: the priority of hetccl's own streams, where the device border's copies, "
       "folds and group steps run. high: the device's greatest, so their kernels' blocks start ahead of the "
       "application's waiting blocks and the exchange runs beside its compute; default: the runtime's default "
       "priority (the folds then queue behind the compute kernels issued before them)",
       0, 0, "high|default"},
      {"HETCCL_CUDA_CONNECTIONS", VarType::kInt, "32", nullptr,
       "hardware queues the CUDA runtime spreads the process's streams over: where CUDA_DEVICE_MAX_CONNECTIONS is "
       "unset when hetccl is loaded, hetccl sets it to this (streams that share a queue with the device border's "
       "waiting streams wait with them, compute included); it takes effect where CUDA starts after hetccl is "
       "loaded (the drop-in through hetccl-torch-run). 0: leave the runtime's default (8); a value the job sets "
       "stays",
       0, 32},
      {"HETCCL_PLAN_FOLDS", VarType::kBool, "0", nullptr,
       "host ranks fold border data after receiving it whole, instead of in the transport as it arrives (a test "
       "setting: it runs the plan's own folds, for a transport that cannot fold what it receives)"},
      {"HETCCL_HOST_LEVELS", VarType::kBool, "1", nullptr,
       "a group of host ranks with the same number (two or more) on each of several hosts runs a large AllReduce in "
       "two levels (inside each host, then across); 0: one level over every rank (every rank must set the same)"},
      {"HETCCL_BORDER_CUT", VarType::kChoice, "size", nullptr,
       "how AllReduce across groups cuts the vector among a group's ranks, and so what each border link carries: "
       "size (equal shards) or bandwidth (shards in proportion to each rank's border link rate, from "
       "HETCCL_LINK_GBPS where every rank has one, else measured at init); every rank must set the same",
       0, 0, "size|bandwidth"},
      {"HETCCL_LINK_GBPS", VarType::kString, "", nullptr,
       "HETCCL_BORDER_CUT=bandwidth: this rank's border link rate in Gbit/s (e.g. 100), or rates by rank (e.g. "
       "0-3:400,4-7:100, ranks as HETCCL_SITE_MAP numbers them)"},
      {"HETCCL_BORDER_PROBE_BYTES", VarType::kBytes, "4M", nullptr,
       "HETCCL_BORDER_CUT=bandwidth without rates: bytes each rank exchanges with each of its border peers, twice, "
       "to measure its link at init",
       4096, int64_t{1} << 30},
      {"HETCCL_FLIGHT_RECORDER", VarType::kInt, "2000", nullptr,
       "calls each communicator remembers (each collective and send/recv of a group counts once) for its "
       "flight recorder dump; 0: none",
       0, 1000000},
      {"HETCCL_FLIGHT_DIR", VarType::kString, "", nullptr,
       "folder where a communicator that fails or is aborted, or whose process gets SIGUSR1 (where the program has "
       "no handler of its own), writes its last calls "
       "(hetccl-flight-<job>-rank<r>.json; hetccl-doctor reads them); unset: no dumps"},
      {"HETCCL_TRACE_FILE", VarType::kString, "", nullptr,
       "file where each rank writes its calls and their group and border steps as Chrome trace events (Perfetto, "
       "chrome://tracing); %r is replaced by the rank; hetccl-trace merge joins the ranks' files on rank 0's clock. "
       "Call spans come from the flight recorder (HETCCL_FLIGHT_RECORDER above 0). Unset: no trace"},
      {"HETCCL_METRICS", VarType::kBool, "1", nullptr,
       "count every call (by collective, size, outcome, duration) and its group and border steps (bytes, time) for "
       "the metrics endpoint; 0: no counting (the calls' counters also need HETCCL_FLIGHT_RECORDER above 0)"},
      {"HETCCL_METRICS_PORT", VarType::kInt, "0", nullptr,
       "serve this process's metrics (Prometheus text, /metrics) and status (JSON, /status) over HTTP on this port "
       "plus the rank's index among the job's ranks on its host (from the first communicator the process makes); "
       "0: no endpoint. GET only; a port that cannot be bound is a warning",
       0, 65535},
      {"HETCCL_METRICS_ADDR", VarType::kString, "127.0.0.1", nullptr,
       "address the metrics endpoint binds to (HETCCL_METRICS_PORT); 0.0.0.0 serves every interface"},
      {"HETCCL_CIVETWEB_LIB", VarType::kString, "libcivetweb.so.1", nullptr,
       "path of the civetweb HTTP library the metrics endpoint loads (Debian: libcivetweb1)"},
      {"HETCCL_STAGING_MAX", VarType::kBytes, "2G", nullptr,
       "GPU ranks: most pinned host memory one communicator keeps for staging border data", int64_t{1} << 20, kTiB},
      {"HETCCL_DEVICE_SCRATCH_MAX", VarType::kBytes, "2G", nullptr,
       "GPU ranks: most device memory one communicator keeps as scratch for staged group steps (the device "
       "border's own scratch is fixed at init: HETCCL_GPU_BORDER_CHUNK)",
       int64_t{1} << 20, kTiB},
      {"HETCCL_SOCKET_BUFFER", VarType::kBytes, "4M", nullptr, "SO_SNDBUF/SO_RCVBUF of TCP transport sockets", 4096,
       int64_t{1} << 30},
  };
  return *vars;
}

const std::vector<RetiredVar>& retiredSettings() {
  static const auto* vars = new std::vector<RetiredVar>{
      {"HETCCL_GPU_DIRECT",
       "the direct path (device memory handed to UCX, the calling thread waiting) is gone; GPU ranks' calls across "
       "groups take the device border (HETCCL_GPU_BORDER) or stage through pinned memory, and never block"},
      {"HETCCL_GPU_DIRECT_MIN", "it sized the direct path, which is gone (HETCCL_GPU_DIRECT)"},
  };
  return *vars;
}

}  // namespace hetccl
