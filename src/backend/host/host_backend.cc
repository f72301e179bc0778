#include "backend/host/host_backend.h"
#include "core/bytes.h"

#include <cstring>

#include "elements/host_reduce.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"

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

HostBackend::HostBackend(const BackendContext& ctx) : Backend(ctx) {
  for (int j = 0; j < nranks(); ++j) all_.push_back(j);
  // Hosts in order of their first rank; two levels only where there are
  // several, with the same number (two or more) of this group's ranks each.
  const std::vector<int>& host = ctx.hostOf;
  if (static_cast<int>(host.size()) != nranks() || !settings::kHostLevels.get()) return;
  std::vector<int> ids;
  std::vector<std::vector<int>> members;
  for (int j = 0; j < nranks(); ++j) {
    size_t h = 0;
    while (h < ids.size() && ids[h] != host[j]) ++h;
    if (h == ids.size()) {
      ids.push_back(host[j]);
      members.emplace_back();
    }
    members[h].push_back(j);
  }
  const size_t m = members[0].size();
  if (members.size() < 2 || m < 2) return;
  for (const auto& v : members)
    if (v.size() != m) return;
  for (size_t h = 0; h < members.size(); ++h) {
    for (size_t i = 0; i < m; ++i) {
      if (members[h][i] != rank()) continue;
      local_ = members[h];
      localMe_ = static_cast<int>(i);
      columnMe_ = static_cast<int>(h);
      for (const auto& v : members) column_.push_back(v[i]);
    }
  }
  LOG_INFO(kBackend, "host backend: group of %d ranks, %zu on each of %zu hosts: large AllReduce in two levels",
           nranks(), m, members.size());
}

void HostBackend::reduceScatterTeam(const std::vector<int>& team, int me, const void* send, void* myOut,
                                    const std::vector<size_t>& bounds, DataType dt, RedKind op) {
  const int k = static_cast<int>(team.size());
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
    x.push_back(Xfer::send(global(team[to]), in + bounds[to] * es, (bounds[to + 1] - bounds[to]) * es, tag()));
    x.push_back(
        Xfer::recvReduce(global(team[from]), myOut, myN * es, dt, op, tag(), j == 1 ? in + myLo * es : nullptr));
    run(x);
  }
}

void HostBackend::allGatherTeam(const std::vector<int>& team, int me, void* buf, const std::vector<size_t>& bounds,
                                DataType dt) {
  const int k = static_cast<int>(team.size());
  const size_t es = dataTypeSize(dt);
  auto* b = static_cast<uint8_t*>(buf);
  std::vector<Xfer> x;
  for (int j = 1; j < k; ++j) {
    int to = (me + j) % k, from = (me - j + k) % k;
    x.push_back(Xfer::send(global(team[to]), b + bounds[me] * es, (bounds[me + 1] - bounds[me]) * es, tag()));
    x.push_back(Xfer::recv(global(team[from]), b + bounds[from] * es, (bounds[from + 1] - bounds[from]) * es, tag()));
  }
  run(x);
}

void HostBackend::allReduceByHost(const void* send, void* recv, size_t count, DataType dt, RedKind op) {
  const size_t es = dataTypeSize(dt);
  auto* out = static_cast<uint8_t*>(recv);
  const int m = static_cast<int>(local_.size()), H = static_cast<int>(column_.size());
  std::vector<size_t> lb(m + 1), cb(H + 1);
  for (int j = 0; j <= m; ++j) lb[j] = count * j / m;
  const size_t lo = lb[localMe_], n = lb[localMe_ + 1] - lo;
  for (int h = 0; h <= H; ++h) cb[h] = lo + n * h / H;
  // My host's sum of shard localMe_, then the whole job's of my part of it
  // (in place: the column step reads and folds recv), then everything.
  reduceScatterTeam(local_, localMe_, send, out + lo * es, lb, dt, op);
  reduceScatterTeam(column_, columnMe_, out, out + cb[columnMe_] * es, cb, dt, op);
  allGatherTeam(column_, columnMe_, out, cb, dt);
  allGatherTeam(local_, localMe_, out, lb, dt);
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
  if (hostLevels() && count >= static_cast<size_t>(k)) return allReduceByHost(send, recv, count, dt, op);
  std::vector<size_t> bounds(k + 1);
  for (int j = 0; j <= k; ++j) bounds[j] = count * j / k;
  // Out of place, the shard folds read `send`; the AllGather fills the rest.
  reduceScatterRanges(send, static_cast<uint8_t*>(recv) + bounds[me] * es, bounds, dt, op);
  allGatherRanges(recv, bounds, dt);
}

void HostBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& rop,
                                Stream) {
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

void HostBackend::reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                      const ReduceOp& op, Stream) {
  reduceScatterRanges(send, recv, bounds, dt, plainKind(op));
}

void HostBackend::allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream) {
  allGatherRanges(buf, bounds, dt);
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

void HostBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& rop, int root,
                         Stream) {
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
