// The rendezvous of hetcclCommGrow: the running ranks keep their numbers and
// new ranks join them at the id that one running rank (the coordinator) made
// with hetcclCommGetUniqueId. The API layer then creates the grown
// communicator as any other, so its groups, transports and border are set
// up as at init.
#pragma once

#include "bootstrap/unique_id.h"
#include "comm/comm.h"
#include "comm/split_shrink.h"

namespace hetccl {

// The coordinator's part: starts the grown communicator's rendezvous root
// (it waits timeoutS for every rank) and keeps the id on `comm` until a grow
// takes it. Throws InvalidUsage while an earlier id is not taken.
IdContents makeGrowId(Comm& comm, double timeoutS);

// The running ranks' part, collective over `parent`: every rank shows the
// nranks and rank it passed, the id it passed (`given`, may be null) and the
// id it holds, over the parent's bootstrap. All check the same table alike:
// rank -1 everywhere, one nranks larger than the parent's, one holder, a
// passed id equal to the holder's. On a failure the holder reports it to the
// grown communicator's root, so that the new ranks fail at once too; the
// held id is taken either way.
DerivedRank growRendezvous(Comm& parent, int nranks, int rank, const hetcclUniqueId* given);

// A new rank's part: checks (nranks, rank) against the grow id `id`; a
// failure is reported to its root first, so that every rank fails at once.
void checkGrowJoin(const IdContents& id, int nranks, int rank, double timeoutS);

}  // namespace hetccl
