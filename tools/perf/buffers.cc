#include "buffers.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace perf {

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes + 2 * kGuard) != 0) throw std::bad_alloc();
  base_ = static_cast<unsigned char*>(p);
  memset(base_, kGuardFill, kGuard);
  memset(base_ + kGuard + bytes, kGuardFill, kGuard);
  poison();
}

GuardedBuffer::~GuardedBuffer() { free(base_); }

void GuardedBuffer::poison() { memset(data(), kPoison, bytes_); }

size_t GuardedBuffer::damagedGuardBytes() const {
  size_t bad = 0;
  for (size_t i = 0; i < kGuard; ++i) {
    bad += base_[i] != kGuardFill;
    bad += base_[kGuard + bytes_ + i] != kGuardFill;
  }
  return bad;
}

uint64_t hashBytes(const void* p, size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace perf
