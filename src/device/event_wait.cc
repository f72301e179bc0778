#include "device/event_wait.h"

#include <chrono>
#include <string>
#include <thread>

#include "core/error.h"

namespace hetccl {

void waitEventChecked(DeviceRuntime& d, Event e, double timeoutS, const std::atomic<bool>* abort, const char* what,
                      const std::function<void()>& check) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutS));
  const auto every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWaitCheckEveryS));
  auto nextCheck = start + every;
  for (int spins = 0; !d.eventDone(e); ++spins) {
    if (abort && abort->load()) throwError(hetcclInvalidUsage, std::string("communicator aborted while ") + what);
    const auto now = Clock::now();
    if (now > end)
      throwError(hetcclRemoteError, std::string("timed out after ") + std::to_string(static_cast<int>(timeoutS)) +
                                        " s " + what + " (HETCCL_TIMEOUT_S)");
    if (check && now >= nextCheck) {
      check();
      nextCheck = now + every;
    }
    if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 100000 ? 200 : 10));
  }
}

}  // namespace hetccl
