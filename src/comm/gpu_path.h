// Which way a GPU rank's border data goes (HETCCL_GPU_DIRECT): staged through
// pinned host memory, or direct (device memory handed to the transport; see
// algorithm/device_direct.h). `1` takes the direct path wherever the
// transport moves the rank's memory; `auto` (the default) only where the
// peers can reach device memory (no host-memory group; on one host, every
// group of this kind; across hosts, a GPU peer-memory module loaded), which
// is where it measured faster than staging, and only for calls of
// HETCCL_GPU_DIRECT_MIN bytes and up (the direct path costs more per call).
#pragma once

#include <string>
#include <vector>

namespace hetccl {

struct GpuPathFacts {
  std::string want;                     // HETCCL_GPU_DIRECT: auto, 0 or 1
  std::string kind;                     // this rank's device kind
  std::string transport;                // the border transport's name
  bool transportMoves = false;          // it takes `kind` memory itself
  std::vector<std::string> groupKinds;  // device kind of every group
  bool singleHost = true;               // every rank on this host
  bool peerMemory = false;              // a GPU peer-memory module is loaded here
};

// "" where the direct path may be taken (the kernels plugin still has to
// load), else why not, in words for the init log and errors.
std::string directPathWhyNot(const GpuPathFacts& f);

// Whether GPU ranks may move AllReduce's border share through the device
// border (comm/device_border.h), from facts every rank shares.
struct DeviceBorderFacts {
  std::string want;                     // HETCCL_GPU_BORDER: auto, 0 or 1
  std::vector<std::string> groupKinds;  // device kind of every group
};
// "" where every rank may set up the device border (each still has to load
// its kernels plugin), else why not. kNotEveryRankSays is returned alone when
// the communicator has no GPU border to speak of (one group, host ranks).
inline constexpr const char* kNotEveryRankSays = "the communicator has host-memory ranks or one group";
std::string deviceBorderWhyNot(const DeviceBorderFacts& f);

// Whether this host has a peer-memory kernel module for `kind` memory, which
// RDMA NICs need to read and write GPU memory (GPUDirect RDMA): cuda:
// nvidia_peermem or nv_peer_mem. Other kinds: false (not known here).
bool gpuPeerMemoryLoaded(const std::string& kind);

}  // namespace hetccl
