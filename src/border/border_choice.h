// Whether a GPU rank's border data goes through the device border
// (HETCCL_GPU_BORDER) or stages through pinned host memory.
#pragma once

#include <string>
#include <vector>

namespace hetccl {

// Whether GPU ranks may move their calls' border shares through the device
// border (border/device_border.h), from facts every rank shares.
struct DeviceBorderFacts {
  std::string want;                     // HETCCL_GPU_BORDER: auto, 0 or 1
  std::vector<std::string> groupKinds;  // device kind of every group
};
// "" where every rank may set up the device border (each still has to load
// its kernels plugin), else why not. kNotEveryRankSays is returned alone when
// the communicator has no GPU border to speak of (one group, host ranks).
inline constexpr const char* kNotEveryRankSays = "the communicator has host-memory ranks or one group";
std::string deviceBorderWhyNot(const DeviceBorderFacts& f);

}  // namespace hetccl
