// The rendezvous of split and shrink (derive.h).
#include "comm/split_shrink.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/auth.h"
#include "bootstrap/root.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

DerivedRank splitRendezvous(Comm& parent, int color, int key, double timeoutS) {
  const int n = parent.nranks(), me = parent.rank();
  struct Entry {
    int32_t color, key;
    uint8_t id[HETCCL_UNIQUE_ID_BYTES];
  };
  std::vector<Entry> all(n);
  all[me].color = color;
  all[me].key = key;
  parent.bootstrap().allGather(all.data(), sizeof(Entry));
  std::vector<int> members;  // of my color, by (key, parent rank)
  for (int r = 0; r < n; ++r)
    if (color != HETCCL_SPLIT_NOCOLOR && all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  // The first member of each color runs the new communicator's root.
  memset(all[me].id, 0, HETCCL_UNIQUE_ID_BYTES);
  if (!members.empty() && members[0] == me) {
    SockAddr at = SockAddr::local();
    hetcclUniqueId uid = encodeUniqueId(startRootServer(at, newIdContents(at), timeoutS));
    memcpy(all[me].id, uid.internal, HETCCL_UNIQUE_ID_BYTES);
  }
  parent.bootstrap().allGather(all.data(), sizeof(Entry));
  DerivedRank out;
  if (members.empty()) return out;
  hetcclUniqueId uid;
  memcpy(uid.internal, all[members[0]].id, HETCCL_UNIQUE_ID_BYTES);
  out.id = decodeUniqueId(uid);
  out.nranks = static_cast<int>(members.size());
  out.rank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  return out;
}

namespace {

// The shrunk communicator's rendezvous: at the lowest survivor's bootstrap
// listener, under a job id and secret that every survivor derives alike from
// the parent's and the number of shrinks so far (no message is needed, so
// dead ranks cannot hold it up). The others' connects are retried until the
// lowest survivor listens there again.
IdContents shrinkId(Comm& parent, int rootRank, uint64_t seq) {
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

std::vector<int> shrinkSurvivors(const Comm& parent, std::vector<int> excluded) {
  const int n = parent.nranks(), me = parent.rank();
  std::sort(excluded.begin(), excluded.end());
  for (size_t i = 0; i < excluded.size(); ++i) {
    HETCCL_CHECK_ARG(excluded[i] >= 0 && excluded[i] < n,
                     "excluded rank " + std::to_string(excluded[i]) + " out of range [0, " + std::to_string(n) + ")");
    HETCCL_CHECK_ARG(i == 0 || excluded[i] != excluded[i - 1],
                     "rank " + std::to_string(excluded[i]) + " is excluded twice");
    HETCCL_CHECK_ARG(excluded[i] != me,
                     "rank " + std::to_string(me) + " is in the exclude list: excluded ranks do not call shrink");
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  return survivors;
}

DerivedRank shrinkRendezvous(Comm& parent, const std::vector<int>& survivors, double timeoutS) {
  const int me = parent.rank();
  const uint64_t seq = parent.nextShrinkSeq();
  DerivedRank out;
  out.id = shrinkId(parent, survivors[0], seq);
  if (me == survivors[0]) startRootServerOn(parent.bootstrap().relisten(), out.id, shrinkJoinS(timeoutS));
  out.nranks = static_cast<int>(survivors.size());
  out.rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
  LOG_INFO(kInit, "rank %d: shrink #%llu: %d of %d ranks remain; new rank %d", me, static_cast<unsigned long long>(seq),
           out.nranks, parent.nranks(), out.rank);
  return out;
}

}  // namespace hetccl
