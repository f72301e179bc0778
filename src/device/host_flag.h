// The host side of the stream flags (DeviceRuntime::streamWaitValue and
// streamWriteValue): 64-bit words in pinned memory that streams wait on
// and store, and that relay threads read, raise and release.
#pragma once

#include <cstdint>

#include "device/device.h"

namespace hetccl {

inline uint64_t flagLoad(volatile uint64_t* f) { return __atomic_load_n(const_cast<uint64_t*>(f), __ATOMIC_ACQUIRE); }

// Raises *f to v, never lowers it: a release stored meanwhile (kFlagReleased,
// above every sequence number) stays.
inline void flagRaise(volatile uint64_t* f, uint64_t v) {
  auto* p = const_cast<uint64_t*>(f);
  uint64_t cur = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
  }
}

// Whatever waits on *f goes on (abort, a failed peer).
inline void flagRelease(volatile uint64_t* f) {
  __atomic_store_n(const_cast<uint64_t*>(f), kFlagReleased, __ATOMIC_RELEASE);
}

inline bool flagReleased(volatile uint64_t* f) { return flagLoad(f) == kFlagReleased; }

}  // namespace hetccl
