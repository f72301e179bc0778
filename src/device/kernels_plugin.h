// Host-side loader of the device reduction kernels plugin
// (libhetccl-cuda-kernels.so, libhetccl-hip-kernels.so; ABI in
// src/kernels/kernels_api.h). Nothing here needs CUDA or HIP.
#pragma once

#include <string>

#include "kernels/kernels_api.h"

namespace hetccl {

// The kernels of device kind `kind` ("cuda" or "hip"), loaded once per
// process and path. Where from: HETCCL_KERNELS_LIB when set; else
// libhetccl-<kind>-kernels.so in the directory of the library holding this
// code (libhetccl.so beside its plugins), else the loader's search path.
// Returns nullptr (with an INFO log saying why) when no plugin is found;
// throws hetccl::Error when a file is there but cannot be loaded, is not a
// hetccl kernels plugin, or implements another ABI version or kind.
const hetcclKernelsApi_t* loadKernels(const std::string& kind);

// Loads the plugin's kernels into the current device's context (the
// plugin's preload entry); throws hetccl::Error naming what failed. Called
// at communicator init: a kernel's lazy load at its first launch can wait
// for the device's streams, which may by then wait on this thread.
void preloadKernels(const hetcclKernelsApi_t& api);

// The file name of the plugin of `kind`: libhetccl-<kind>-kernels.so.
std::string kernelsLibName(const std::string& kind);

}  // namespace hetccl
