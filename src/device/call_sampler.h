// Which small GPU calls across groups are timed (algorithm/
// device_border_call.h): their timed events would cost the GPU more than
// half of a small call, so about one enqueue in `every` is timed and counts
// for the enqueues since the last one timed. One decision an enqueue
// (between newEnqueue calls: every small call of a group call agrees), at
// random gaps of 1 to 2 x every - 1 such enqueues (mean `every`), so that
// no pattern of calls with a fixed period is always or never timed. The
// enqueuing thread's.
#pragma once

#include <cstdint>

namespace hetccl {

class SmallCallSampler {
 public:
  // 0 where this enqueue is not timed, else the number of enqueues with
  // small calls its time stands for.
  uint64_t sample(uint64_t every);
  // The border work of the next enqueue begins.
  void newEnqueue() { decided_ = false; }

 private:
  bool decided_ = false;  // for this enqueue: weight_
  uint64_t weight_ = 0, gap_ = 0, left_ = 0, rng_ = 0x2545F4914F6CDD1Dull;
};

}  // namespace hetccl
