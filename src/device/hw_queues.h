// How many hardware queues the CUDA runtime spreads a process's streams
// over (CUDA_DEVICE_MAX_CONNECTIONS: 8 unless the environment says, at most
// 32), and hetccl's part in it.
//
// Streams that share a hardware queue run their work in one order: a stream
// waiting on a memory flag holds the queue, and another stream's kernels
// behind it in that queue wait too. The device border's internal streams
// wait for their peers' flags for milliseconds at a time, so with 8 queues
// the application's compute, on a stream the runtime happened to give one
// of theirs, stopped for the whole exchange (docs/design-gpu.md, "Beside
// the application's compute"; the measurements in docs/performance.md).
// So when the library is loaded, and the environment does not set it,
// hetccl sets CUDA_DEVICE_MAX_CONNECTIONS to HETCCL_CUDA_CONNECTIONS (32,
// the most; 0 leaves the runtime's default). That takes effect where the
// process starts CUDA after loading hetccl (the drop-in preloaded by
// hetccl-torch-run, or hetccl imported before CUDA is used); a value the
// job sets (a framework that wants one queue, say) is left as it is, and
// a GPU rank's init logs what it found.
#pragma once

#include <string>

namespace hetccl {

struct HardwareQueues {
  std::string before;            // CUDA_DEVICE_MAX_CONNECTIONS when hetccl was loaded ("" unset)
  int set = 0;                   // what hetccl set it to (0: it did not)
  bool cudaLoadedFirst = false;  // libcuda was already in the process then (CUDA may have started)
  std::string error;             // HETCCL_CUDA_CONNECTIONS could not be read then (init reports it)
};

// What happened when the library was loaded.
const HardwareQueues& hardwareQueues();

// The decision alone: the variable's value at load (null: unset) and
// HETCCL_CUDA_CONNECTIONS's: the value to set, or 0 to leave it.
int queuesToSet(const char* current, int wanted);

// One line for a GPU rank's init log: the queues in effect and why, and
// whether the border's waits may hold the application's streams.
std::string describeHardwareQueues();
// A CUDA rank's runtime is made: logs that line once a process (a warning
// where the border's waits may hold the application's streams); throws
// naming HETCCL_CUDA_CONNECTIONS where it could not be read at load.
void noteHardwareQueues();

}  // namespace hetccl
