#include "core/error.h"

#include <cstring>

namespace hetccl {

void throwError(hetcclResult_t code, std::string msg) { throw Error(code, std::move(msg)); }

void throwSystemError(const std::string& what, int err) { throw Error(hetcclSystemError, what + ": " + strerror(err)); }

void throwRefused(hetcclResult_t code, std::string msg) { throw RefusedError(code, std::move(msg)); }

}  // namespace hetccl
