#include "algorithm/local_ops.h"

#include "algorithm/coll.h"
#include "elements/host_reduce.h"
#include "core/bytes.h"
#include "comm/comm.h"
#include "observe/observed.h"

namespace hetccl {

void LocalOps::fold(void* dst, const void* const* parts, int nparts, size_t n, DataType dt, RedKind k, void* tmp) {
  foldLeft(
      dst, parts, nparts, tmp, [&](void* out, const void* a, const void* b) { reduce(out, a, b, n, dt, k); },
      [&](void* to, const void* from) { copy(to, from, n * dataTypeSize(dt)); });
}

bool HostLocalOps::transportFolds() const { return !c_.planFolds(); }

uint8_t* HostLocalOps::scratch(size_t bytes) { return c_.scratch(bytes); }

// Each op is local work between the call's steps (observe/observed.h).
void HostLocalOps::reduce(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind k) {
  noteLocalWork();
  reduceArrays(out, a, b, n, dt, k);
}

void HostLocalOps::copy(void* dst, const void* src, size_t bytes) {
  noteLocalWork();
  copyBytes(dst, src, bytes);
}

void HostLocalOps::scale(void* out, const void* in, size_t n, DataType dt, double scalar) {
  noteLocalWork();
  scaleArray(out, in, n, dt, scalar);
}

void HostLocalOps::divide(void* buf, size_t n, DataType dt, int divisor) {
  noteLocalWork();
  divideArray(buf, n, dt, divisor);
}

void runBorder(const PlanContext& p, std::vector<Xfer>& x) {
  if (!x.empty()) p.comm.transport().run(x);
}

}  // namespace hetccl
