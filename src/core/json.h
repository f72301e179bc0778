// The small pieces of JSON that hetccl writes itself (flight recorder dumps,
// trace files): a string literal, escaped.
#pragma once

#include <string>

namespace hetccl {

// s as a JSON string: quotes, backslashes and control characters escaped.
std::string jsonQuoted(const std::string& s);

}  // namespace hetccl
