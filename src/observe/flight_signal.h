// SIGUSR1 asks every live communicator of the process that records to a
// folder (HETCCL_FLIGHT_DIR) for its flight recorder's dump, as a stuck job
// is inspected from outside: `kill -USR1 <pid>`, then hetccl-doctor. The
// handler only writes a byte to a pipe; a thread of its own reads it and
// writes the dumps, so nothing that is unsafe in a signal handler runs in
// it. Installed at the first such communicator, and only where SIGUSR1
// still has its default action: a program's own handler stays (a log line
// says so).
#pragma once

#include <functional>
#include <string>

namespace hetccl {

// Adds `dump` (a communicator's: called with the reason, "SIGUSR1") to what
// SIGUSR1 runs, under `key` (arming the signal on first use).
void watchFlightSignal(const void* key, std::function<void(const std::string& reason)> dump);
// Takes key's dump out; after it returns that dump is not running and will
// not start.
void unwatchFlightSignal(const void* key);

}  // namespace hetccl
