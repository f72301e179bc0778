#include "comm/gpu_path.h"

#include <sys/stat.h>

namespace hetccl {

std::string directPathWhyNot(const GpuPathFacts& f) {
  if (f.want == "0") {
    return f.transportMoves ? "HETCCL_GPU_DIRECT=0; transport " + f.transport + " could take " + f.kind +
                                  " memory itself: HETCCL_GPU_DIRECT=auto or 1 hands it over"
                            : "HETCCL_GPU_DIRECT=0";
  }
  if (!f.transportMoves) return "transport " + f.transport + " moves host memory only";
  if (f.want == "1") return "";
  // auto: where the peers' side can reach this rank's memory itself. A
  // host-memory peer gets the data through UCX's own host bounce buffers,
  // slower than staging (docs/performance.md). On one host, GPUs of another
  // kind cannot map this one's memory either (no IPC between vendors);
  // across hosts, RDMA NICs reach GPU memory only through a peer-memory
  // module (GPUDirect RDMA).
  for (const std::string& k : f.groupKinds) {
    if (k == "host" || (f.singleHost && k != f.kind))
      return "HETCCL_GPU_DIRECT=auto: a group of " + k + " ranks would get this rank's " + f.kind +
             " memory through the transport's own host bounce buffers, measured slower than staging "
             "(HETCCL_GPU_DIRECT=1 forces the direct path)";
  }
  if (!f.singleHost && !f.peerMemory)
    return "HETCCL_GPU_DIRECT=auto: ranks on several hosts and no GPU peer-memory module (GPUDirect RDMA) "
           "loaded here (HETCCL_GPU_DIRECT=1 forces the direct path)";
  return "";
}

std::string deviceBorderWhyNot(const DeviceBorderFacts& f) {
  if (f.groupKinds.size() < 2) return kNotEveryRankSays;
  for (const std::string& k : f.groupKinds)
    if (k == "host") return kNotEveryRankSays;
  if (f.want == "0") return "HETCCL_GPU_BORDER=0";
  return "";
}

bool gpuPeerMemoryLoaded(const std::string& kind) {
  if (kind != "cuda") return false;
  struct stat st;
  return stat("/sys/module/nvidia_peermem", &st) == 0 || stat("/sys/module/nv_peer_mem", &st) == 0;
}

}  // namespace hetccl
