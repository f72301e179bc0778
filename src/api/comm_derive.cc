// Communicators made from another: split and shrink (comm_create.h).
#include <algorithm>
#include <cstring>

#include "api/comm_create.h"
#include "api/guard.h"
#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

CommOptions inheritedOptions(const hetcclComm& parent) {
  CommOptions o = parent.options();
  o.transport = parent.transportName();
  o.groupName.clear();
  return o;
}

hetcclComm* splitComm(hetcclComm* comm, int color, int key, CommOptions opts) {
  checkReady(comm);
  HETCCL_CHECK_ARG(color >= 0 || color == HETCCL_SPLIT_NOCOLOR, "color must be >= 0 or HETCCL_SPLIT_NOCOLOR");
  ExclusiveUse use(*comm);
  // Split uses the bootstrap ring on this thread: queued non-blocking work
  // (which may use the ring too) finishes first.
  comm->proxy().drain();
  if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(comm->rank()).name;
  if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
  const int n = comm->nranks();
  struct Entry {
    int32_t color, key;
    uint8_t id[HETCCL_UNIQUE_ID_BYTES];
  };
  std::vector<Entry> all(n);
  all[comm->rank()].color = color;
  all[comm->rank()].key = key;
  comm->bootstrap().allGather(all.data(), sizeof(Entry));
  std::vector<int> members;  // of my color, by (key, parent rank)
  for (int r = 0; r < n; ++r)
    if (color != HETCCL_SPLIT_NOCOLOR && all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  // The first member of each color runs the new communicator's root.
  memset(all[comm->rank()].id, 0, HETCCL_UNIQUE_ID_BYTES);
  if (!members.empty() && members[0] == comm->rank()) {
    SockAddr at = SockAddr::local();
    hetcclUniqueId uid = encodeUniqueId(startRootServer(at, newIdContents(at), opts.timeoutS));
    memcpy(all[comm->rank()].id, uid.internal, HETCCL_UNIQUE_ID_BYTES);
  }
  comm->bootstrap().allGather(all.data(), sizeof(Entry));
  if (members.empty()) return nullptr;
  hetcclUniqueId uid;
  memcpy(uid.internal, all[members[0]].id, HETCCL_UNIQUE_ID_BYTES);
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank()) - members.begin());
  return createComm(decodeUniqueId(uid), static_cast<int>(members.size()), newRank, opts);
}

namespace {

// The shrunk communicator's rendezvous: at the lowest survivor's bootstrap
// listener, under a job id and secret that every survivor derives alike from
// the parent's and the number of shrinks so far (no message is needed, so
// dead ranks cannot hold it up). The others' connects are retried until the
// lowest survivor listens there again.
IdContents shrinkId(hetcclComm& parent, int rootRank, uint64_t seq) {
  const IdContents& p = parent.bootstrap().id();
  IdContents id;
  id.root = parent.bootstrap().listenerAddr(rootRank);
  struct Label {
    char what[8];
    uint64_t seq, part;
  } label{{'s', 'h', 'r', 'i', 'n', 'k'}, seq, 0};
  id.jobId = p.jobId ^ secretMac(p.secret, &label, sizeof(label));
  for (size_t i = 0; i < id.secret.size() / 8; ++i) {
    label.part = i + 1;
    uint64_t word = secretMac(p.secret, &label, sizeof(label));
    memcpy(id.secret.data() + 8 * i, &word, 8);
  }
  return id;
}

}  // namespace

hetcclComm* shrinkComm(hetcclComm* comm, std::vector<int> excluded, CommOptions opts, int flags) {
  checkReady(comm);
  const int n = comm->nranks(), me = comm->rank();
  HETCCL_CHECK_ARG((flags & ~HETCCL_SHRINK_ABORT) == 0, "shrinkFlags " + std::to_string(flags) +
                                                           " has bits other than HETCCL_SHRINK_ABORT");
  std::sort(excluded.begin(), excluded.end());
  for (size_t i = 0; i < excluded.size(); ++i) {
    HETCCL_CHECK_ARG(excluded[i] >= 0 && excluded[i] < n, "excluded rank " + std::to_string(excluded[i]) +
                                                              " out of range [0, " + std::to_string(n) + ")");
    HETCCL_CHECK_ARG(i == 0 || excluded[i] != excluded[i - 1],
                     "rank " + std::to_string(excluded[i]) + " is excluded twice");
    HETCCL_CHECK_ARG(excluded[i] != me, "rank " + std::to_string(me) +
                                            " is in the exclude list: excluded ranks do not call shrink");
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  if (flags & HETCCL_SHRINK_ABORT) {
    // Every survivor ends the parent's work; peers waiting on this rank learn at once.
    comm->fail(hetcclRemoteError, "the communicator's work was aborted by a shrink");
    comm->abort();
  } else {
    comm->proxy().drain();
  }
  if (opts.groupName.empty()) opts.groupName = comm->topo().groupOfRank(me).name;
  if (opts.deviceKind == comm->device().kind()) comm->device().makeCurrent();
  const uint64_t seq = comm->nextShrinkSeq();
  IdContents id = shrinkId(*comm, survivors[0], seq);
  if (me == survivors[0]) startRootServerOn(comm->bootstrap().relisten(), id, opts.timeoutS);
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
  LOG_INFO(kInit, "rank %d: shrink #%llu: %zu of %d ranks remain; new rank %d", me,
           static_cast<unsigned long long>(seq), survivors.size(), n, newRank);
  return createComm(id, static_cast<int>(survivors.size()), newRank, opts);
}

}  // namespace hetccl
