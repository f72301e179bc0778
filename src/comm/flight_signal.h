// SIGUSR1 asks every live communicator of the process that records to a
// folder (HETCCL_FLIGHT_DIR) for its flight recorder's dump, as a stuck job
// is inspected from outside: `kill -USR1 <pid>`, then hetccl-doctor. The
// handler only writes a byte to a pipe; a thread of its own reads it and
// writes the dumps, so nothing that is unsafe in a signal handler runs in
// it. Installed at the first such communicator, and only where SIGUSR1
// still has its default action: a program's own handler stays (a log line
// says so).
#pragma once

namespace hetccl {

class Comm;

// Adds c to the communicators dumped on SIGUSR1 (arming it on first use).
void watchFlightSignal(Comm* c);
// Takes c out; after it returns no dump of c is running or will start.
void unwatchFlightSignal(Comm* c);

}  // namespace hetccl
