// Host buffers with guard zones on both sides, to catch writes out of bounds.
#ifndef HETCCL_TOOLS_PERF_BUFFERS_H_
#define HETCCL_TOOLS_PERF_BUFFERS_H_

#include <cstddef>
#include <cstdint>

namespace perf {

class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  unsigned char* data() { return base_ + kGuard; }
  const unsigned char* data() const { return base_ + kGuard; }
  size_t bytes() const { return bytes_; }
  // The whole allocation, guards included (GPU ranks mirror it on the device).
  unsigned char* raw() { return base_; }
  size_t rawBytes() const { return bytes_ + 2 * kGuard; }
  static constexpr size_t guardBytes() { return kGuard; }

  // Sets every byte of the data to the poison value: NaN in half and e5m2,
  // huge in the other floating types, 126 in (u)int8; far from every value the
  // reference patterns produce, so an output left unwritten counts as wrong.
  void poison();
  // Guard bytes that no longer hold their fill value.
  size_t damagedGuardBytes() const;

  static constexpr unsigned char kPoison = 0x7E;

 private:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kGuardFill = 0x5A;
  unsigned char* base_ = nullptr;
  size_t bytes_ = 0;
};

// 64-bit FNV-1a of the bytes.
uint64_t hashBytes(const void* p, size_t n);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_BUFFERS_H_
