// The one place where C++ errors become C status codes: every extern "C"
// entry point runs its body through guard(), which records the message as
// the last error (per thread, and per communicator) and never lets an
// exception cross the C boundary.
#pragma once

#include <new>
#include <string>

#include "comm/comm.h"
#include "core/error.h"

namespace hetccl {

void recordError(hetcclComm* comm, const char* fn, hetcclResult_t code, const std::string& msg);
void clearError();
// A copy owned by the calling thread, valid until its next call.
const char* lastErrorText(const hetcclComm* comm);
void registerComm(hetcclComm* comm);
// Throws InvalidUsage while a non-blocking init is still running.
void checkReady(const hetcclComm* comm);

// A reference to a live communicator for the length of one API call: taken
// under the registry's lock, so a communicator that Abort or Destroy has
// removed is refused (InvalidUsage; InvalidArgument for NULL) and one that a
// call holds is never freed under it. Every entry point that touches a
// communicator holds one.
class CommRef {
 public:
  explicit CommRef(hetcclComm* comm);
  ~CommRef();
  CommRef(const CommRef&) = delete;
  CommRef& operator=(const CommRef&) = delete;

 private:
  hetcclComm* comm_;
};

// Removes comm from the registry, so later calls are refused: Abort's way.
// Throws as CommRef when comm is not live.
void retireComm(hetcclComm* comm);
// Returns once no call holds a reference to a retired comm (each leaves
// soon once the comm's abort flag is set: every wait polls it).
void waitUntilIdle(hetcclComm* comm);
// Destroy's way: removes comm only if no other call holds it, else throws
// InvalidUsage (atomically: no call can take it in between).
void retireIdleComm(hetcclComm* comm);
// Whether comm is registered now (for messages; no reference is taken).
bool commIsLive(const hetcclComm* comm);

// Held by a data call (collective, send/recv, group end, split) for as long
// as it touches the communicator's connections. Calls on one communicator
// must come one at a time (NCCL's rule too): a second thread's call
// meanwhile would interleave their messages, so it fails, and fails the
// communicator (its ranks' calls no longer line up).
class ExclusiveUse {
 public:
  explicit ExclusiveUse(hetcclComm& comm);
  ~ExclusiveUse();
  ExclusiveUse(const ExclusiveUse&) = delete;
  ExclusiveUse& operator=(const ExclusiveUse&) = delete;

 private:
  hetcclComm& comm_;
};

// Runs the part of a call that moves data: an error escaping it leaves this
// rank out of step with its peers, so the communicator is failed (sticky on
// this rank; its peers learn at once: Comm::fail) before the error goes on.
template <class F>
void failOnError(hetcclComm& comm, F&& body) {
  try {
    body();
  } catch (const RefusedError&) {
    throw;  // refused before anything moved: the communicator is as it was
  } catch (const Error& e) {
    // A call that fails because another thread or a peer failed the
    // communicator names that first cause, not only what it saw after it.
    const std::string cause = comm.fail(e.code(), e.what());
    if (cause != e.what())
      throw Error(e.code(), std::string(e.what()) + " (the communicator had failed: " + cause + ")");
    throw;
  } catch (const std::bad_alloc& e) {
    comm.fail(hetcclSystemError, "out of memory");
    throw;  // guard() reports it as out of memory
  } catch (const std::exception& e) {
    const std::string cause = comm.fail(hetcclInternalError, e.what());
    if (cause != e.what())
      throw Error(hetcclInternalError, std::string(e.what()) + " (the communicator had failed: " + cause + ")");
    throw;
  }
}

template <class F>
hetcclResult_t guard(hetcclComm* comm, const char* fn, F&& body) {
  try {
    body();
    return hetcclSuccess;
  } catch (const Error& e) {
    recordError(comm, fn, e.code(), e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    recordError(comm, fn, hetcclSystemError, "out of memory");
    return hetcclSystemError;
  } catch (const std::exception& e) {
    recordError(comm, fn, hetcclInternalError, e.what());
    return hetcclInternalError;
  } catch (...) {
    recordError(comm, fn, hetcclInternalError, "unknown exception");
    return hetcclInternalError;
  }
}

}  // namespace hetccl
