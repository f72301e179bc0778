// Creating a rank's communicator, for every hetcclCommInit* entry point and
// the drop-in's ncclCommInit*; and the thread's group (hetcclGroupStart/End),
// which defers both calls and inits to its outermost End, as NCCL does.
#pragma once

#include <vector>

#include "algorithm/coll.h"
#include "bootstrap/unique_id.h"
#include "comm/comm.h"

namespace hetccl {

// A blocking communicator returns initialised (inside a group: registered,
// and initialised at the group's end, together with the group's other
// inits, so one thread can create the communicators of several devices).
// A non-blocking one returns at once; its init runs on its proxy.
// Throws on bad arguments or a failed blocking init (nothing is left).
hetcclComm* createComm(const IdContents& id, int nranks, int rank, const CommOptions& opts);

// readOptions(config) for rank `rank` of job `id`; a failure (a bad setting
// or config) is reported to the rendezvous root first, so that the other
// ranks fail at once too.
CommOptions readOptionsOrReport(const hetcclConfig_t* config, const IdContents& id, int rank, int nranks);

// Rank 0's rendezvous root under a launcher: it listens on the address the
// launcher gave (MASTER_ADDR; loopback stays loopback), or on every
// address where that one is not this host's. With a secret derived from
// launcher variables and a listener other hosts can reach, warns once.
void startLauncherRoot(const IdContents& id, bool weakSecret);

// NCCL's convention: a call on a non-blocking communicator that started
// fine says hetcclInProgress.
hetcclResult_t startedResult(hetcclResult_t r, const hetcclComm* comm);

struct PendingCall {
  hetcclComm* comm;
  CollArgs args;
};
struct PendingInit {
  hetcclComm* comm;
  IdContents id;
};
struct GroupState {
  int depth = 0;
  std::vector<PendingCall> calls;
  std::vector<PendingInit> inits;
};
// This thread's group; groups nest per thread.
GroupState& threadGroup();

// Starts the inits of a group's end, each on its communicator's proxy, and
// waits for the blocking ones. Throws the first failure (its communicator
// stays registered for the caller to destroy). Returns whether any was
// non-blocking (then still running).
bool runPendingInits(const std::vector<PendingInit>& inits);

}  // namespace hetccl

namespace hetccl {

// What a derived communicator (split, shrink) takes when the caller gives
// no config (NCCL's rule): the parent's settings.
CommOptions inheritedOptions(const hetcclComm& parent);

// hetcclCommSplit's body, under a CommRef of parent: the ranks of `color`,
// ordered by (key, parent rank); null for HETCCL_SPLIT_NOCOLOR. An empty
// opts.groupName keeps this rank's group.
hetcclComm* splitComm(hetcclComm* parent, int color, int key, CommOptions opts);

// hetcclCommShrink's (ncclCommShrink's) body, under a CommRef of parent:
// the ranks not in `excluded`, in parent order. Excluded ranks take no part
// (they may be dead): the survivors meet at the lowest survivor's bootstrap
// listener under a secret derived from the parent's. flags & 1
// (HETCCL_SHRINK_ABORT): the parent's work is aborted first, everywhere.
hetcclComm* shrinkComm(hetcclComm* parent, std::vector<int> excluded, CommOptions opts, int flags);

// hetcclCommGetUniqueId's body (comm/grow.h's makeGrowId), under a CommRef.
hetcclUniqueId growId(hetcclComm* comm);

// hetcclCommGrow's bodies. A running rank (under a CommRef of comm) keeps its
// rank; `id` is the grow id where this rank passed one. A new rank joins at
// the grow id `id` (decoded) as `rank`, with its own options. Both create the
// grown communicator as at init.
hetcclComm* growComm(hetcclComm* comm, int nranks, int rank, const hetcclUniqueId* id, CommOptions opts);
hetcclComm* joinGrownComm(const IdContents& id, int nranks, int rank, const CommOptions& opts);

}  // namespace hetccl
