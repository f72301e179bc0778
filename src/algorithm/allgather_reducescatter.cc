// AllGather and ReduceScatter across groups. Each rank's block crosses to
// every other group exactly once, to a "counterpart" there (the member whose
// index is the rank's own index modulo the group size); inside the group the
// blocks then spread with backend send/recv (AllGather), or are reduced at
// the counterpart before they cross (ReduceScatter).
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithm/coll.h"
#include "elements/host_reduce.h"
#include "algorithm/local_ops.h"
#include "comm/comm.h"

namespace hetccl {
namespace {

// Global rank (of group g) that stands for rank r of another group.
int counterpart(const Topology& t, int g, int r) {
  const Group& grp = t.groups[g];
  return grp.ranks[static_cast<size_t>(t.groupRank[r]) % grp.ranks.size()];
}

// Blocks that member m of its group holds after the border step: its own
// and those of other groups' ranks it is the counterpart of (ascending).
std::vector<int> heldBlocks(const Topology& t, int m) {
  std::vector<int> out;
  int g = t.groupOf[m];
  for (int r = 0; r < static_cast<int>(t.groupOf.size()); ++r)
    if (r == m || (t.groupOf[r] != g && counterpart(t, g, r) == m)) out.push_back(r);
  return out;
}

// Position of group g in the receiving order of group h (other groups
// ascending): the round in which h receives from g.
int roundOf(int g, int h) { return g < h ? g + 1 : g; }

}  // namespace

void runAllGather(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const Topology& t = c.topo();
  const size_t bytes = a.count * dataTypeSize(a.dt);
  Backend& be = p.backend;
  if (t.ngroups() == 1) {
    be.allGather(a.send, a.recv, a.count, a.dt, a.stream);
    return;
  }
  auto* out = static_cast<uint8_t*>(a.recv);
  const int me = c.rank(), g = c.myGroup();
  HostLocalOps lo(c);
  if (out + me * bytes != a.send) lo.copy(out + me * bytes, a.send, bytes);
  // Border: my block to my counterpart in each other group; blocks of the
  // ranks I stand for from them.
  std::vector<Xfer> x;
  for (int h = 0; h < t.ngroups(); ++h)
    if (h != g) x.push_back(Xfer::send(counterpart(t, h, me), out + me * bytes, bytes, p.tag));
  for (int r : heldBlocks(t, me))
    if (r != me) x.push_back(Xfer::recv(r, out + r * bytes, bytes, p.tag));
  runBorder(p, x);
  // Group: every member sends what it holds to every other member.
  const Group& grp = t.groups[g];
  be.groupStart();
  std::vector<int> mine = heldBlocks(t, me);
  for (size_t j = 0; j < grp.ranks.size(); ++j) {
    int m = grp.ranks[j];
    if (m == me) continue;
    for (int b : mine) be.send(out + b * bytes, a.count, a.dt, static_cast<int>(j), a.stream);
    for (int b : heldBlocks(t, m)) be.recv(out + b * bytes, a.count, a.dt, static_cast<int>(j), a.stream);
  }
  be.groupEnd();
}

void runReduceScatter(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const Topology& t = c.topo();
  const size_t es = dataTypeSize(a.dt), R = a.count;
  const int n = c.nranks(), me = c.rank(), g = c.myGroup();
  const void* in = a.send;
  std::vector<uint8_t> scaled;  // PreMulSum: a scaled copy of the input
  if (a.op.preMul) {
    scaled.resize(R * n * es);
    scaleArray(scaled.data(), a.send, R * n, a.dt, a.op.scalar);
    in = scaled.data();
  }
  Backend& be = p.backend;
  if (t.ngroups() == 1) {
    be.reduceScatter(in, a.recv, R, a.dt, a.op.kind, a.stream);
    if (a.op.postDiv) divideArray(a.recv, R, a.dt, a.op.divisor);
    return;
  }
  auto* src = static_cast<const uint8_t*>(in);
  auto* out = static_cast<uint8_t*>(a.recv);
  std::vector<int> held = heldBlocks(t, me);
  std::vector<int> foreign;
  for (int b : held)
    if (b != me) foreign.push_back(b);
  // The chunk must be the same on every rank (messages are matched by size):
  // it is sized for the rank that holds the most foreign blocks.
  size_t maxForeign = 1;
  for (int m = 0; m < n; ++m) maxForeign = std::max(maxForeign, heldBlocks(t, m).size() - 1);
  const size_t chunk = std::max<size_t>(1, c.buffBytes() / (es * maxForeign));
  uint8_t* tmp = foreign.empty() ? nullptr : c.scratch(std::min(chunk, R) * es * foreign.size());
  for (size_t off = 0; off < R; off += chunk) {
    size_t cnt = std::min(chunk, R - off);
    // Group: each block's partial reduced at the member that owns it here.
    be.groupStart();
    for (int b = 0; b < n; ++b) {
      int owner = t.groupOf[b] == g ? b : counterpart(t, g, b);
      uint8_t* dst = nullptr;
      if (owner == me) {
        if (b == me) {
          dst = out + off * es;
        } else {
          size_t slot = std::find(foreign.begin(), foreign.end(), b) - foreign.begin();
          dst = tmp + slot * cnt * es;
        }
      }
      be.reduce(src + (static_cast<size_t>(b) * R + off) * es, dst, cnt, a.dt, a.op.kind, t.groupRank[owner], a.stream);
    }
    be.groupEnd();
    // Border, round r: the receiver folds group r of its others-order.
    for (int round = 1; round < t.ngroups(); ++round) {
      std::vector<Xfer> x;
      for (size_t s = 0; s < foreign.size(); ++s)
        if (roundOf(g, t.groupOf[foreign[s]]) == round)
          x.push_back(Xfer::send(foreign[s], tmp + s * cnt * es, cnt * es, p.tag));
      int h = round - 1 < g ? round - 1 : round;  // my round-th other group
      x.push_back(Xfer::recvReduce(counterpart(t, h, me), out + off * es, cnt * es, a.dt, a.op.kind, p.tag));
      c.transport().run(x);
    }
  }
  if (a.op.postDiv) divideArray(out, R, a.dt, a.op.divisor);
}

}  // namespace hetccl
