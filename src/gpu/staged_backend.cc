#include "gpu/staged_backend.h"

#include <algorithm>
#include <cstring>

#include "algorithm/self_exchange.h"
#include "core/bytes.h"
#include "core/error.h"

namespace hetccl {
namespace {

constexpr int kIn = 0, kOut = 1, kP2p = 2;  // device scratch slots

size_t align256(size_t n) { return (n + 255) & ~size_t{255}; }

}  // namespace

StagedBackend::StagedBackend(Backend& inner, const BackendContext& ctx, StagingState& ds)
    : WrappingBackend(inner, ctx), ds_(ds), dev_(*ctx.device) {}

void StagedBackend::wait(const char* what) { ds_.sync(ctx_.timeoutS, ctx_.abort, what); }

template <typename F>
void StagedBackend::staged(const void* in, size_t inBytes, void* out, size_t outBytes, F call) {
  bool inPlace = in == out && in != nullptr;
  uint8_t* dIn = inBytes ? ds_.scratch().get(kIn, std::max(inBytes, inPlace ? outBytes : 0)) : nullptr;
  uint8_t* dOut = inPlace ? dIn : (outBytes ? ds_.scratch().get(kOut, outBytes) : nullptr);
  if (inBytes) dev_.copy(dIn, in, inBytes, ds_.stream());
  call(dIn, dOut, ds_.stream());
  if (outBytes) dev_.copy(out, dOut, outBytes, ds_.stream());
  wait("waiting for a group step of the vendor library");
}

void StagedBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream) {
  size_t bytes = count * dataTypeSize(dt);
  if (nranks() == 1) return copyBytes(recv, send, bytes);
  staged(send, bytes, recv, bytes, [&](uint8_t* i, uint8_t* o, Stream s) { inner_.allReduce(i, o, count, dt, op, s); });
}

void StagedBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                                  Stream) {
  size_t bytes = recvcount * dataTypeSize(dt);
  if (nranks() == 1) return copyBytes(recv, send, bytes);
  // Out of place on the device (the host copies may overlap as NCCL's
  // in-place form does: recv == send + rank * recvcount).
  uint8_t* dIn = ds_.scratch().get(kIn, bytes * nranks());
  uint8_t* dOut = ds_.scratch().get(kOut, bytes);
  dev_.copy(dIn, send, bytes * nranks(), ds_.stream());
  inner_.reduceScatter(dIn, dOut, recvcount, dt, op, ds_.stream());
  dev_.copy(recv, dOut, bytes, ds_.stream());
  wait("waiting for a group ReduceScatter of the vendor library");
}

void StagedBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream) {
  size_t bytes = sendcount * dataTypeSize(dt);
  if (nranks() == 1) return copyBytes(recv, send, bytes);
  uint8_t* dIn = ds_.scratch().get(kIn, bytes);
  uint8_t* dOut = ds_.scratch().get(kOut, bytes * nranks());
  dev_.copy(dIn, send, bytes, ds_.stream());
  inner_.allGather(dIn, dOut, sendcount, dt, ds_.stream());
  dev_.copy(recv, dOut, bytes * nranks(), ds_.stream());
  wait("waiting for a group AllGather of the vendor library");
}

void StagedBackend::reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                        const ReduceOp& op, Stream) {
  const size_t es = dataTypeSize(dt), mine = (bounds[rank() + 1] - bounds[rank()]) * es;
  if (nranks() == 1) return copyBytes(recv, static_cast<const uint8_t*>(send) + bounds[0] * es, mine);
  uint8_t* dIn = ds_.scratch().get(kIn, bounds.back() * es);
  uint8_t* dOut = ds_.scratch().get(kOut, std::max<size_t>(mine, 1));
  dev_.copy(dIn, send, bounds.back() * es, ds_.stream());
  inner_.reduceScatterShards(dIn, dOut, bounds, dt, op, ds_.stream());
  if (mine) dev_.copy(recv, dOut, mine, ds_.stream());
  wait("waiting for a group ReduceScatter of the vendor library");
}

void StagedBackend::allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream) {
  if (nranks() == 1) return;
  const size_t es = dataTypeSize(dt), lo = bounds[rank()] * es, mine = bounds[rank() + 1] * es - lo;
  auto* b = static_cast<uint8_t*>(buf);
  uint8_t* d = ds_.scratch().get(kIn, bounds.back() * es);
  if (mine) dev_.copy(d + lo, b + lo, mine, ds_.stream());
  inner_.allGatherShards(d, bounds, dt, ds_.stream());
  dev_.copy(b, d, bounds.back() * es, ds_.stream());
  wait("waiting for a group AllGather of the vendor library");
}

void StagedBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream) {
  size_t bytes = count * dataTypeSize(dt);
  if (nranks() == 1) return copyBytes(recv, send, bytes);
  const void* in = rank() == root ? send : nullptr;
  staged(in, in ? bytes : 0, recv, bytes,
         [&](uint8_t* i, uint8_t* o, Stream s) { inner_.broadcast(i ? i : o, o, count, dt, root, s); });
}

void StagedBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                           Stream) {
  size_t bytes = count * dataTypeSize(dt);
  if (nranks() == 1) return copyBytes(recv, send, bytes);
  bool isRoot = rank() == root;
  uint8_t* dIn = ds_.scratch().get(kIn, bytes);
  uint8_t* dOut = isRoot ? ds_.scratch().get(kOut, bytes) : nullptr;
  dev_.copy(dIn, send, bytes, ds_.stream());
  inner_.reduce(dIn, isRoot ? dOut : dIn, count, dt, op, root, ds_.stream());
  if (isRoot) dev_.copy(recv, dOut, bytes, ds_.stream());
  wait("waiting for a group Reduce of the vendor library");
}

void StagedBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream) {
  p2p_.push_back(P2p{true, const_cast<void*>(buf), count, dt, peer});
  if (depth_ == 0) flushP2p();
}

void StagedBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream) {
  p2p_.push_back(P2p{false, buf, count, dt, peer});
  if (depth_ == 0) flushP2p();
}

void StagedBackend::groupStart() { ++depth_; }

void StagedBackend::groupEnd() {
  if (depth_ == 0) throwError(hetcclInternalError, "staged backend: groupEnd without groupStart");
  if (--depth_ == 0) flushP2p();
}

void StagedBackend::flushP2p() {
  std::vector<P2p> ops;
  ops.swap(p2p_);
  if (ops.empty()) return;
  if (nranks() == 1) {  // a group of one: its own sends and receives
    std::vector<SelfSide> sends, recvs;
    for (const P2p& p : ops) (p.isSend ? sends : recvs).push_back({p.host, p.count * dataTypeSize(p.dt)});
    if (std::string why = copySelfExchanges(sends, recvs); !why.empty()) throwError(hetcclInvalidUsage, why);
    return;
  }
  std::vector<size_t> at(ops.size());
  size_t total = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    at[k] = total;
    total += align256(ops[k].count * dataTypeSize(ops[k].dt));
  }
  uint8_t* d = ds_.scratch().get(kP2p, total);
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].isSend) dev_.copy(d + at[k], ops[k].host, ops[k].count * dataTypeSize(ops[k].dt), ds_.stream());
  inner_.groupStart();
  for (size_t k = 0; k < ops.size(); ++k) {
    if (ops[k].isSend)
      inner_.send(d + at[k], ops[k].count, ops[k].dt, ops[k].peer, ds_.stream());
    else
      inner_.recv(d + at[k], ops[k].count, ops[k].dt, ops[k].peer, ds_.stream());
  }
  inner_.groupEnd();
  for (size_t k = 0; k < ops.size(); ++k)
    if (!ops[k].isSend) dev_.copy(ops[k].host, d + at[k], ops[k].count * dataTypeSize(ops[k].dt), ds_.stream());
  wait("waiting for group send/recv of the vendor library");
}

}  // namespace hetccl
