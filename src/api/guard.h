// The one place where C++ errors become C status codes: every extern "C"
// entry point runs its body through guard(), which records the message as
// the last error (per thread, and per communicator) and never lets an
// exception cross the C boundary.
#pragma once

#include <new>
#include <string>

#include "core/comm.h"
#include "core/error.h"

namespace hetccl {

void recordError(hetcclComm* comm, const char* fn, hetcclResult_t code, const std::string& msg);
void clearError();
const char* lastErrorText(const hetcclComm* comm);
// Throws InvalidArgument on null, InvalidUsage on a communicator that was
// destroyed, aborted or never created.
void checkComm(const hetcclComm* comm);
void registerComm(hetcclComm* comm);
// Throws InvalidUsage while a non-blocking init is still running.
void checkReady(const hetcclComm* comm);
void unregisterComm(hetcclComm* comm);

// Counts the calls running on a communicator, so Abort can wait for them to
// leave before it frees it.
class CallScope {
 public:
  explicit CallScope(hetcclComm* comm);
  ~CallScope();

 private:
  hetcclComm* comm_;
};

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
