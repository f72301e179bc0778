// Copies that accept the null buffers the API allows with a count of 0.
#pragma once

#include <cstddef>
#include <cstring>

namespace hetccl {

inline void copyBytes(void* dst, const void* src, size_t n) {
  if (n != 0 && dst != src) memmove(dst, src, n);
}

}  // namespace hetccl
