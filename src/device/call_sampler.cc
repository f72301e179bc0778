#include "device/call_sampler.h"

namespace hetccl {

uint64_t SmallCallSampler::sample(uint64_t every) {
  if (decided_) return weight_;
  if (every < 2) return weight_ = 1;  // every call
  decided_ = true;
  auto draw = [&] {  // xorshift64: 1 .. 2 x every - 1
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return 1 + rng_ % (2 * every - 1);
  };
  if (left_ == 0) gap_ = left_ = draw();
  weight_ = --left_ == 0 ? gap_ : 0;
  return weight_;
}

}  // namespace hetccl
