// Broadcast and Reduce across groups: the root's data crosses to one leader
// per group (Broadcast) or each group's partial crosses once to the root
// (Reduce); the group steps run in each group's backend.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithm/coll.h"
#include "elements/host_reduce.h"
#include "algorithm/local_ops.h"
#include "comm/comm.h"

namespace hetccl {
namespace {

// The rank of each group that talks across the border: the root in its own
// group, the lowest rank elsewhere.
std::vector<int> leaders(const Comm& c, int root) {
  std::vector<int> out;
  for (const Group& g : c.topo().groups) out.push_back(g.ranks[0]);
  out[c.topo().groupOf[root]] = root;
  return out;
}

}  // namespace

void runBroadcast(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const Topology& t = c.topo();
  const size_t bytes = a.count * dataTypeSize(a.dt);
  if (t.ngroups() == 1) {
    p.backend.broadcast(a.send, a.recv, a.count, a.dt, t.groupRank[a.root], a.stream);
    return;
  }
  std::vector<int> lead = leaders(c, a.root);
  const int g = c.myGroup(), hRoot = t.groupOf[a.root];
  std::vector<Xfer> x;
  if (c.rank() == a.root) {
    for (int h = 0; h < t.ngroups(); ++h)
      if (h != hRoot) x.push_back(Xfer::send(lead[h], a.send, bytes, p.tag));
  } else if (c.rank() == lead[g]) {
    x.push_back(Xfer::recv(a.root, a.recv, bytes, p.tag));
  }
  runBorder(p, x);
  const void* src = c.rank() == a.root ? a.send : a.recv;
  p.backend.broadcast(src, a.recv, a.count, a.dt, t.groupRank[lead[g]], a.stream);
}

void runReduce(const PlanContext& p, const CollArgs& a) {
  Comm& c = p.comm;
  const Topology& t = c.topo();
  const size_t es = dataTypeSize(a.dt);
  const bool isRoot = c.rank() == a.root;
  const void* in = a.send;
  std::vector<uint8_t> scaled;  // PreMulSum: a scaled copy of the input (N elements)
  if (a.op.preMul) {
    scaled.resize(a.count * es);
    scaleArray(scaled.data(), a.send, a.count, a.dt, a.op.scalar);
    in = scaled.data();
  }
  Backend& be = p.backend;
  if (t.ngroups() == 1) {
    be.reduce(in, a.recv, a.count, a.dt, a.op.kind, t.groupRank[a.root], a.stream);
    if (isRoot && a.op.postDiv) divideArray(a.recv, a.count, a.dt, a.op.divisor);
    return;
  }
  std::vector<int> lead = leaders(c, a.root);
  const int g = c.myGroup(), hRoot = t.groupOf[a.root];
  const bool isLeader = c.rank() == lead[g];
  // Chunks bound the leaders' staging to HETCCL_BUFFSIZE.
  const size_t chunk = std::max<size_t>(1, c.buffBytes() / es);
  uint8_t* tmp = (isLeader && !isRoot) ? c.scratch(std::min(chunk, a.count) * es) : nullptr;
  for (size_t off = 0; off < a.count || (off == 0 && a.count == 0); off += chunk) {
    size_t n = std::min(chunk, a.count - off);
    uint8_t* dst = isRoot ? static_cast<uint8_t*>(a.recv) + off * es : tmp;
    be.reduce(static_cast<const uint8_t*>(in) + off * es, dst, n, a.dt, a.op.kind, t.groupRank[lead[g]], a.stream);
    if (isRoot) {
      // Fold the other groups' partials in group order.
      for (int h = 0; h < t.ngroups(); ++h) {
        if (h == hRoot) continue;
        std::vector<Xfer> x{Xfer::recvReduce(lead[h], dst, n * es, a.dt, a.op.kind, p.tag)};
        c.transport().run(x);
      }
    } else if (isLeader) {
      std::vector<Xfer> x{Xfer::send(a.root, tmp, n * es, p.tag)};
      c.transport().run(x);
    }
    if (a.count == 0) break;
  }
  if (isRoot && a.op.postDiv) divideArray(a.recv, a.count, a.dt, a.op.divisor);
}

}  // namespace hetccl
