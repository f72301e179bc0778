// A job where a peer's part of a call is done and it exits while the rank
// it sent to still waits on a third (layout a,b,c): rank 1 receives from
// ranks 0 and 2 in one group call; rank 0 sends and ends its job at once,
// rank 2 sends a second later (ten of rank 1's checks of its peers'
// processes). The call must succeed: the exited rank is no dead one.
#pragma once

#include <unistd.h>

#include <vector>

#include "harness.h"

namespace hmp {

inline void receiveFromTwoWhileOneExits(Rank& r) {
  std::vector<float> s(4096, 1.0f + r.rank), from0(s.size(), 0.0f), from2(s.size(), 0.0f);
  if (r.rank == 1) {
    HC_ASSERT_OK(hetcclGroupStart(), nullptr);
    HC_ASSERT_OK(hetcclRecv(from0.data(), s.size(), hetcclFloat32, 0, r.comm, nullptr), r.comm);
    HC_ASSERT_OK(hetcclRecv(from2.data(), s.size(), hetcclFloat32, 2, r.comm, nullptr), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    EXPECT_EQ(from0.back(), 1.0f);
    EXPECT_EQ(from2.back(), 3.0f);
    return;
  }
  if (r.rank == 2) usleep(1000 * 1000);
  HC_ASSERT_OK(hetcclSend(s.data(), s.size(), hetcclFloat32, 1, r.comm, nullptr), r.comm);
}

}  // namespace hmp
