// Error type used inside hetccl. Every failure is thrown as hetccl::Error with
// a status code (NCCL's meanings) and a message that says what, where and which
// peer; src/api/guard.h turns it into a status code and the last-error text.
#pragma once

#include <string>
#include <stdexcept>

#include "hetccl/hetccl.h"

namespace hetccl {

class Error : public std::runtime_error {
 public:
  Error(hetcclResult_t code, std::string msg) : std::runtime_error(std::move(msg)), code_(code) {}
  hetcclResult_t code() const { return code_; }

 private:
  hetcclResult_t code_;
};

// A call refused by its own checks before it moved anything (a send to self
// with no receive from self, say): the communicator's connections are as
// they were, so it stays usable (the data path fails the communicator on
// any other error).
class RefusedError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throwError(hetcclResult_t code, std::string msg);
[[noreturn]] void throwRefused(hetcclResult_t code, std::string msg);
// errno-based system error: "<what>: <strerror(errno)>".
[[noreturn]] void throwSystemError(const std::string& what, int err);

#define HETCCL_CHECK_ARG(cond, msg)                                  \
  do {                                                               \
    if (!(cond)) ::hetccl::throwError(hetcclInvalidArgument, (msg)); \
  } while (0)

#define HETCCL_CHECK_USAGE(cond, msg)                             \
  do {                                                            \
    if (!(cond)) ::hetccl::throwError(hetcclInvalidUsage, (msg)); \
  } while (0)

}  // namespace hetccl
