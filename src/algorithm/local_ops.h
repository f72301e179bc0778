// How a plan combines data in host memory: the host reductions, with the
// transport folding incoming data as it arrives (Xfer::recvReduce), or,
// under HETCCL_PLAN_FOLDS, border data received whole into scratch and then
// folded by the plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/datatype.h"
#include "transport/transport.h"

namespace hetccl {

class Comm;
struct PlanContext;

class LocalOps {
 public:
  virtual ~LocalOps() = default;
  // Whether the transport folds receive-reduces itself; when false the plan
  // receives into scratch and folds with reduce().
  virtual bool transportFolds() const = 0;
  // `bytes` of scratch where the buffers live, kept from call to call.
  virtual uint8_t* scratch(size_t bytes) = 0;
  // out[i] = a[i] op b[i]; out may be a or b.
  virtual void reduce(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind k) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // dst = parts[0] op ... op parts[nparts-1], folded left to right (the
  // order of foldOrdered, so both forms give the same bits); tmp holds n
  // elements when nparts > 2.
  void fold(void* dst, const void* const* parts, int nparts, size_t n, DataType dt, RedKind k, void* tmp);
  virtual void scale(void* out, const void* in, size_t n, DataType dt, double scalar) = 0;
  virtual void divide(void* buf, size_t n, DataType dt, int divisor) = 0;
};

// The host form, over the communicator's scratch.
class HostLocalOps final : public LocalOps {
 public:
  explicit HostLocalOps(Comm& c) : c_(c) {}
  bool transportFolds() const override;
  uint8_t* scratch(size_t bytes) override;
  void reduce(void* out, const void* a, const void* b, size_t n, DataType dt, RedKind k) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void scale(void* out, const void* in, size_t n, DataType dt, double scalar) override;
  void divide(void* buf, size_t n, DataType dt, int divisor) override;

 private:
  Comm& c_;
};

// Runs a border step's transfers on the plan's buffers; nothing when x is
// empty.
void runBorder(const PlanContext& p, std::vector<Xfer>& x);

}  // namespace hetccl
