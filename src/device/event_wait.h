// A wait for an event (polled, bounded like waitEvent) that also runs a
// check now and then: a GPU rank's communicator looks at its peers'
// processes while a call of its waits (comm/host_ranks.cc).
#pragma once

#include <atomic>
#include <functional>

#include "device/device.h"

namespace hetccl {

// How often the check runs while a wait goes on: a dead peer is seen about
// this long after it died, and the check's system calls stay far from a
// core's worth.
inline constexpr double kWaitCheckEveryS = 0.1;

// waitEvent (HETCCL_TIMEOUT_S, the abort flag), calling `check` (if set)
// about every kWaitCheckEveryS until e is done: an exception from it ends
// the wait.
void waitEventChecked(DeviceRuntime& d, Event e, double timeoutS, const std::atomic<bool>* abort, const char* what,
                      const std::function<void()>& check);

}  // namespace hetccl
