// The rendezvous of a communicator made from another (hetcclCommSplit,
// hetcclCommShrink): which ranks it has, this rank's place, and the unique
// id they meet at. The API layer then creates it as any other.
#pragma once

#include <vector>

#include "bootstrap/unique_id.h"
#include "comm/comm.h"

namespace hetccl {

struct DerivedRank {
  IdContents id;
  int nranks = 0;
  int rank = -1;  // -1: this rank is in none (HETCCL_SPLIT_NOCOLOR)
};

// Split: every parent rank shows its (color, key) over the parent's
// bootstrap; the members of a color are ordered by (key, parent rank), and
// the first starts the new communicator's root and shares its id.
// Collective over all the parent's ranks.
DerivedRank splitRendezvous(Comm& parent, int color, int key, double timeoutS);

// Shrink: the ranks not in `excluded`, in parent order. Throws
// InvalidArgument for a rank out of range, excluded twice, or this one.
std::vector<int> shrinkSurvivors(const Comm& parent, std::vector<int> excluded);
// No message is exchanged, so dead ranks hold nothing up: the survivors
// meet at the lowest survivor's bootstrap address under a job id and secret
// derived from the parent's and the number of shrinks so far; the lowest
// survivor listens there again.
DerivedRank shrinkRendezvous(Comm& parent, const std::vector<int>& survivors, double timeoutS);
// How long a shrink's rendezvous waits for every survivor: two timeouts, as
// one survivor may learn of the failure at once (a closed link) and another
// only at its timeout (a call blocked on a live peer that stopped, as a ucx
// link does not tell of a peer's abort).
inline double shrinkJoinS(double timeoutS) { return 2 * timeoutS; }

}  // namespace hetccl
