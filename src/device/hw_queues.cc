#include "device/hw_queues.h"

#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"

namespace hetccl {
namespace {

constexpr int kRuntimeDefault = 8;  // CUDA's number of connections where the variable is unset

bool libcudaLoaded() {
  return dl_iterate_phdr([](dl_phdr_info* info, size_t,
                            void*) { return info->dlpi_name && strstr(info->dlpi_name, "libcuda.so") ? 1 : 0; },
                         nullptr) != 0;
}

HardwareQueues& state() {
  static HardwareQueues s;
  return s;
}

// At load, before main where the library is preloaded or linked: nothing
// may throw out of here.
__attribute__((constructor)) void raiseHardwareQueues() {
  HardwareQueues& s = state();
  const char* now = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  s.before = now ? now : "";
  s.cudaLoadedFirst = libcudaLoaded();
  int wanted = 0;
  try {
    wanted = static_cast<int>(settings::kCudaConnections.get());
  } catch (const std::exception& e) {
    s.error = e.what();
    return;
  }
  s.set = queuesToSet(now, wanted);
  if (s.set > 0) setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(s.set).c_str(), 1);  // unset or empty
}

}  // namespace

const HardwareQueues& hardwareQueues() { return state(); }

int queuesToSet(const char* current, int wanted) { return (current && *current) || wanted <= 0 ? 0 : wanted; }

std::string describeHardwareQueues() {
  const HardwareQueues& s = hardwareQueues();
  if (s.set > 0)
    return "CUDA_DEVICE_MAX_CONNECTIONS=" + std::to_string(s.set) + " (set by hetccl at load" +
           (s.cudaLoadedFirst ? "; libcuda was loaded before hetccl, so CUDA may have started with its default of " +
                                    std::to_string(kRuntimeDefault) +
                                    ": set it in the job's environment for the border's waits not to hold the "
                                    "application's streams)"
                              : ")");
  if (!s.before.empty()) {
    const int n = atoi(s.before.c_str());
    return "CUDA_DEVICE_MAX_CONNECTIONS=" + s.before + " (the job's)" +
           (n > 0 && n < 32 ? std::string("; with fewer than 32 hardware queues a stream of the application that "
                                          "shares one with the border's waiting streams waits with them")
                            : std::string());
  }
  return "CUDA_DEVICE_MAX_CONNECTIONS unset (HETCCL_CUDA_CONNECTIONS=0: the runtime's " +
         std::to_string(kRuntimeDefault) + " hardware queues)";
}

void noteHardwareQueues() {
  const HardwareQueues& q = hardwareQueues();
  if (!q.error.empty()) throwError(hetcclInvalidArgument, q.error);
  static std::atomic<bool> told{false};
  if (told.exchange(true)) return;
  const int job = atoi(q.before.c_str());
  if ((q.set > 0 && q.cudaLoadedFirst) || (q.set == 0 && job > 0 && job < 32))
    LOG_WARN(kDevice, "%s", describeHardwareQueues().c_str());
  else
    LOG_INFO(kDevice, "%s", describeHardwareQueues().c_str());
}

}  // namespace hetccl
