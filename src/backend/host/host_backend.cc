#include "backend/host/host_backend.h"
#include "core/bytes.h"

#include <cstring>

#include "elements/host_reduce.h"
#include "core/error.h"

namespace hetccl {
namespace {

// Multi-group plans scale and divide around their group steps; the host
// backend combines only.
RedKind plainKind(const ReduceOp& op) {
  if (!op.plain()) throwError(hetcclInternalError, "host backend: PreMulSum/Avg must be resolved by the plan");
  return op.kind;
}

}  // namespace

void HostBackend::run(std::vector<Xfer>& xfers) {
  if (!xfers.empty()) ctx_.transport->run(xfers);
}

void HostBackend::reduceScatterRanges(const void* send, void* myOut, const std::vector<size_t>& bounds, DataType dt,
                                      RedKind op) {
  const int k = nranks(), me = rank();
  const size_t es = dataTypeSize(dt);
  auto* in = static_cast<const uint8_t*>(send);
  size_t myLo = bounds[me], myN = bounds[me + 1] - myLo;
  if (k == 1) return copyBytes(myOut, in + myLo * es, myN * es);
  // Round j: give rank me-j its shard, fold in rank me+j's contribution to
  // mine. Each shard is folded in one fixed order: deterministic. The first
  // fold reads my own contribution from the input (no copy into myOut).
  for (int j = 1; j < k; ++j) {
    int to = (me - j + k) % k, from = (me + j) % k;
    std::vector<Xfer> x;
    x.push_back(Xfer::send(global(to), in + bounds[to] * es, (bounds[to + 1] - bounds[to]) * es, tag()));
    x.push_back(Xfer::recvReduce(global(from), myOut, myN * es, dt, op, tag(), j == 1 ? in + myLo * es : nullptr));
    run(x);
  }
}

void HostBackend::allGatherRanges(void* buf, const std::vector<size_t>& bounds, DataType dt) {
  const int k = nranks(), me = rank();
  const size_t es = dataTypeSize(dt);
  auto* b = static_cast<uint8_t*>(buf);
  std::vector<Xfer> x;
  for (int j = 1; j < k; ++j) {
    int to = (me + j) % k, from = (me - j + k) % k;
    x.push_back(Xfer::send(global(to), b + bounds[me] * es, (bounds[me + 1] - bounds[me]) * es, tag()));
    x.push_back(Xfer::recv(global(from), b + bounds[from] * es, (bounds[from + 1] - bounds[from]) * es, tag()));
  }
  run(x);
}

void HostBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& rop, Stream) {
  const RedKind op = plainKind(rop);
  const int k = nranks(), me = rank();
  const size_t es = dataTypeSize(dt), bytes = count * es;
  if (k == 1 || count == 0) return copyBytes(recv, send, bytes);
  if (bytes < ctx_.smallBytes || count < static_cast<size_t>(k)) {
    copyBytes(recv, send, bytes);
    // Latency path: everyone sends everything to everyone, folds in rank order.
    scratch_.resize(bytes * (k + 1));
    std::vector<Xfer> x;
    std::vector<const void*> parts(k);
    for (int j = 0; j < k; ++j) {
      if (j == me) {
        parts[j] = recv;
        continue;
      }
      x.push_back(Xfer::send(global(j), recv, bytes, tag()));
      void* slot = scratch_.data() + bytes * j;
      x.push_back(Xfer::recv(global(j), slot, bytes, tag()));
      parts[j] = slot;
    }
    run(x);
    foldOrdered(recv, parts.data(), k, count, dt, op, scratch_.data() + bytes * k);
    return;
  }
  std::vector<size_t> bounds(k + 1);
  for (int j = 0; j <= k; ++j) bounds[j] = count * j / k;
  // Out of place, the shard folds read `send`; the AllGather fills the rest.
  reduceScatterRanges(send, static_cast<uint8_t*>(recv) + bounds[me] * es, bounds, dt, op);
  allGatherRanges(recv, bounds, dt);
}

void HostBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& rop, Stream) {
  const RedKind op = plainKind(rop);
  const int k = nranks();
  std::vector<size_t> bounds(k + 1);
  for (int j = 0; j <= k; ++j) bounds[j] = recvcount * j;
  reduceScatterRanges(send, recv, bounds, dt, op);
}

void HostBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream) {
  const int k = nranks(), me = rank();
  const size_t es = dataTypeSize(dt);
  auto* mine = static_cast<uint8_t*>(recv) + static_cast<size_t>(me) * sendcount * es;
  copyBytes(mine, send, sendcount * es);
  std::vector<size_t> bounds(k + 1);
  for (int j = 0; j <= k; ++j) bounds[j] = sendcount * j;
  allGatherRanges(recv, bounds, dt);
}

void HostBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream) {
  const int k = nranks(), me = rank();
  const size_t bytes = count * dataTypeSize(dt);
  std::vector<Xfer> x;
  if (me == root) {
    copyBytes(recv, send, bytes);
    for (int j = 0; j < k; ++j)
      if (j != me) x.push_back(Xfer::send(global(j), recv, bytes, tag()));
  } else {
    x.push_back(Xfer::recv(global(root), recv, bytes, tag()));
  }
  run(x);
}

void HostBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& rop, int root, Stream) {
  const RedKind op = plainKind(rop);
  const int k = nranks(), me = rank();
  const size_t bytes = count * dataTypeSize(dt);
  if (me != root) {
    std::vector<Xfer> x{Xfer::send(global(root), send, bytes, tag())};
    run(x);
    return;
  }
  copyBytes(recv, send, bytes);
  // Fold the others in ascending rank order (deterministic).
  for (int j = 0; j < k; ++j) {
    if (j == me) continue;
    std::vector<Xfer> x{Xfer::recvReduce(global(j), recv, bytes, dt, op, tag())};
    run(x);
  }
}

void HostBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream) {
  pending_.push_back(Xfer::send(global(peer), buf, count * dataTypeSize(dt), tag()));
  if (groupDepth_ == 0) groupEnd();
}

void HostBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream) {
  pending_.push_back(Xfer::recv(global(peer), buf, count * dataTypeSize(dt), tag()));
  if (groupDepth_ == 0) groupEnd();
}

void HostBackend::groupEnd() {
  if (groupDepth_ > 0) --groupDepth_;
  if (groupDepth_ > 0) return;
  std::vector<Xfer> x;
  x.swap(pending_);
  run(x);
}

}  // namespace hetccl
