// AllReduce: group ReduceScatter, border reduce-scatter/allgather between the
// groups' shard owners, group AllGather (the DESIGN.md central path).
#include <algorithm>
#include <cstring>

#include "algorithm/coll.h"
#include "core/bytes.h"
#include "algorithm/local_ops.h"
#include "comm/comm.h"
#include "core/log.h"
#include "topology/border.h"

namespace hetccl {
namespace {

// The border step: after it, every owner holds the final value of what it
// owns. Where the transport folds (the default), my parts are received with
// receive-reduce; with HETCCL_PLAN_FOLDS each round's parts arrive whole in
// scratch and are folded there, in the same order.
void borderReduce(const PlanContext& pc, LocalOps& lo, const BorderAssignment& ba, uint8_t* buf, DataType dt,
                  const ReduceOp& op) {
  Comm& c = pc.comm;
  const int G = c.topo().ngroups(), g = c.myGroup();
  const size_t es = dataTypeSize(dt);
  const MsgTag& tag = pc.tag;
  const bool folds = lo.transportFolds();

  size_t sharedElems = 0, mineElems = 0;
  for (const auto& p : ba.shared) sharedElems += p.count;
  for (const auto& p : ba.split) mineElems += p.partLo(g + 1) - p.partLo(g);
  // Shared pieces: G-1 receive slots plus one fold scratch per element; then,
  // where the plan folds, one receive slot for my split parts.
  const size_t foldElems = folds ? 0 : mineElems;
  uint8_t* staging = sharedElems + foldElems ? lo.scratch((sharedElems * G + foldElems) * es) : nullptr;
  uint8_t* incoming = staging ? staging + sharedElems * G * es : nullptr;

  // Split pieces: round t gives part g+t to its owner and folds part g from
  // group g-t. One owner folds each part, in a fixed order: every rank ends
  // with the same bits, run after run.
  for (int t = 1; t < G; ++t) {
    std::vector<Xfer> x;
    int to = (g + t) % G, from = (g - t + G) % G;
    size_t at = 0;
    for (const auto& p : ba.split) {
      size_t sLo = p.partLo(to), sHi = p.partLo(to + 1);
      size_t rLo = p.partLo(g), rHi = p.partLo(g + 1);
      if (sHi > sLo) x.push_back(Xfer::send(p.owners[to], buf + sLo * es, (sHi - sLo) * es, tag));
      if (rHi == rLo) continue;
      if (folds)
        x.push_back(Xfer::recvReduce(p.owners[from], buf + rLo * es, (rHi - rLo) * es, dt, op.kind, tag));
      else
        x.push_back(Xfer::recv(p.owners[from], incoming + at * es, (rHi - rLo) * es, tag));
      at += rHi - rLo;
    }
    if (t == 1) {
      size_t sat = 0;
      for (const auto& p : ba.shared) {
        for (int dst : p.sendTo) x.push_back(Xfer::send(dst, buf + p.offset * es, p.count * es, tag));
        for (int h = 0; h < G; ++h) {
          if (h == g) continue;
          x.push_back(Xfer::recv(p.recvFrom[h], staging + (sat + h * sharedElems) * es, p.count * es, tag));
        }
        sat += p.count;
      }
    }
    runBorder(pc, x);
    if (folds) continue;
    at = 0;  // mine = mine op incoming, as the transport's receive-reduce would
    for (const auto& p : ba.split) {
      size_t rLo = p.partLo(g), rHi = p.partLo(g + 1);
      if (rHi > rLo) lo.reduce(buf + rLo * es, buf + rLo * es, incoming + at * es, rHi - rLo, dt, op.kind);
      at += rHi - rLo;
    }
  }
  // Shared pieces: fold all G partials in group order.
  size_t at = 0;
  std::vector<const void*> parts(G);
  for (const auto& p : ba.shared) {
    for (int h = 0; h < G; ++h) parts[h] = h == g ? buf + p.offset * es : staging + (at + h * sharedElems) * es;
    // The fold scratch is the slot of this rank's own group (unused).
    lo.fold(buf + p.offset * es, parts.data(), G, p.count, dt, op.kind, staging + (at + g * sharedElems) * es);
    if (op.postDiv) lo.divide(buf + p.offset * es, p.count, dt, op.divisor);
    at += p.count;
  }
  for (const auto& p : ba.split) {
    size_t lo0 = p.partLo(g), hi = p.partLo(g + 1);
    if (op.postDiv && hi > lo0) lo.divide(buf + lo0 * es, hi - lo0, dt, op.divisor);
  }
  // Split pieces: hand my finished parts to the other owners. The sends are
  // lazy: my parts are in my own shard, which the group AllGather after this
  // only reads, so the peers may read them while it runs (the plan drains
  // before it returns).
  std::vector<Xfer> x;
  for (const auto& p : ba.split) {
    size_t lo0 = p.partLo(g), hi = p.partLo(g + 1);
    for (int h = 0; h < G; ++h) {
      if (h == g) continue;
      if (hi > lo0) {
        x.push_back(Xfer::send(p.owners[h], buf + lo0 * es, (hi - lo0) * es, tag));
        x.back().lazy = true;
      }
      size_t rLo = p.partLo(h), rHi = p.partLo(h + 1);
      if (rHi > rLo) x.push_back(Xfer::recv(p.owners[h], buf + rLo * es, (rHi - rLo) * es, tag));
    }
  }
  runBorder(pc, x);
}

// PreMulSum: the scaled input, written to buf; otherwise `in` itself.
const uint8_t* preScaled(LocalOps& lo, const CollArgs& a, const uint8_t* in, uint8_t* buf, size_t n) {
  if (!a.op.preMul) return in;
  lo.scale(buf, in, n, a.dt, a.op.scalar);
  return buf;
}

// Every group's shard layout: equal shards (the size cut), or in proportion
// to the members' border bandwidth where the communicator has weights.
std::vector<ShardLayout> allReduceLayouts(const Comm& c, size_t n, bool latency) {
  std::vector<ShardLayout> layouts;
  const std::vector<double>& w = c.borderWeights();
  for (const Group& grp : c.topo().groups) {
    if (w.empty()) {
      layouts.push_back(shardLayout(n, static_cast<int>(grp.ranks.size()), latency));
      continue;
    }
    std::vector<double> mine;
    for (int r : grp.ranks) mine.push_back(w[r]);
    layouts.push_back(weightedShardLayout(n, mine, latency));
  }
  return layouts;
}

// One AllReduce across groups of `n` elements of `in` into `buf`.
void allReduceAcrossGroups(const PlanContext& p, LocalOps& lo, const CollArgs& a, const uint8_t* in, uint8_t* buf,
                           size_t n) {
  Comm& c = p.comm;
  const size_t es = dataTypeSize(a.dt);
  in = preScaled(lo, a, in, buf, n);
  Backend& be = p.backend;
  // Out of place, the group steps read the input where it is: no copy of it
  // into buf first (the final AllGather fills what this rank does not own).
  const Topology& t = c.topo();
  bool latency = n * es < c.smallBytes();
  const std::vector<ShardLayout> layouts = allReduceLayouts(c, n, latency);
  const ShardLayout& mine = layouts[c.myGroup()];
  const int i = c.groupRank();

  // Group step: my group's partial of my shard, and of the tail everywhere.
  if (mine.sharded()) be.reduceScatterShards(in, buf + mine.lo(i) * es, mine.bounds, a.dt, a.op.kind, a.stream);
  if (mine.mainEnd() < n)
    be.allReduce(in + mine.mainEnd() * es, buf + mine.mainEnd() * es, n - mine.mainEnd(), a.dt, a.op.kind, a.stream);

  // Lazy border sends (see borderReduce) are waited for before returning,
  // or forgotten when the call fails.
  struct Drain {
    Transport& t;
    bool done = false;
    ~Drain() {
      if (!done) t.forgetLazy();
    }
  } drain{c.transport()};
  borderReduce(p, lo, assignBorder(t, layouts, c.rank()), buf, a.dt, a.op);

  // Group step: everyone's final shards.
  if (mine.sharded()) be.allGatherShards(buf, mine.bounds, a.dt, a.stream);
  c.transport().drain();
  drain.done = true;
}

}  // namespace

size_t allReduceChunk(const Comm& c, size_t count, DataType dt) {
  const size_t es = dataTypeSize(dt);
  if (c.topo().ngroups() == 1 || c.chunkBytes() == 0 || count * es <= c.chunkBytes()) return std::max<size_t>(count, 1);
  return std::max<size_t>(c.chunkBytes() / es, 1);
}

void runAllReduce(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const size_t es = dataTypeSize(a.dt), n = a.count;
  auto* buf = static_cast<uint8_t*>(a.recv);
  const auto* in = static_cast<const uint8_t*>(a.send);
  HostLocalOps lo(c);
  if (c.topo().ngroups() == 1) {
    p.backend.allReduce(preScaled(lo, a, in, buf, n), buf, n, a.dt, a.op.kind, a.stream);
    if (a.op.postDiv) lo.divide(buf, n, a.dt, a.op.divisor);
    return;
  }
  if (n == 0) return;
  // Large calls run chunk after chunk, each a whole AllReduce of its range
  // (every rank cuts alike: HETCCL_CHUNK_BYTES is equal everywhere).
  const size_t step = allReduceChunk(c, n, a.dt);
  ChunkHooks* hooks = p.hooks;
  if (step < n) LOG_TRACE(kColl, "AllReduce of %zu elements in chunks of %zu", n, step);
  for (size_t off = 0, k = 0; off < n; off += step, ++k) {
    if (hooks && hooks->before) hooks->before(k);
    allReduceAcrossGroups(p, lo, a, in + off * es, buf + off * es, std::min(step, n - off));
    if (hooks && hooks->after) hooks->after(k);
  }
}

}  // namespace hetccl
