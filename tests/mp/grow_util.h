// What the grow tests share (test_grow.cc on host ranks, test_emu_grow.cc
// on emulated GPU ranks): two running ranks, split off the job's
// communicator (ranks 0 and 1), grow to four with ranks 2 and 3. The grow id
// travels from rank 0 to the new ranks over the job's communicator: the
// application's own channel, as MPI or a file would be.
#pragma once

#include <gtest/gtest.h>

#include "checks.h"
#include "layouts.h"

namespace hmp {

inline hetcclComm_t runningPair(Rank& r) {
  hetcclComm_t pair = nullptr;
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.transport = r.transport.c_str();
  r.progress("split off the running pair");
  HC_ASSERT_OK(hetcclCommSplit(r.comm, r.rank < 2 ? 0 : HETCCL_SPLIT_NOCOLOR, r.rank, &pair, &cfg), r.comm);
  EXPECT_EQ(pair == nullptr, r.rank >= 2);
  return pair;
}

// Rank 0's id reaches every rank of the job (through device memory on GPU
// ranks).
inline hetcclUniqueId shareId(Rank& r, hetcclUniqueId id) {
  r.progress("share the grow id");
  DeviceBuffer b(r, sizeof(id));
  b.upload(&id, sizeof(id));
  HC_ASSERT_OK(hetcclBroadcast(b.get(), b.get(), sizeof(id), hetcclUint8, 0, r.comm, r.stream), r.comm);
  syncStream(r);
  b.download(&id, sizeof(id));
  return id;
}

// A new rank's config: its own group (the layout's) and the job's transport.
inline hetcclConfig_t newRankConfig(const Rank& r) {
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.groupName = r.group.c_str();
  cfg.transport = r.transport.c_str();
  cfg.device = r.device.c_str();
  return cfg;
}

inline void checkEveryCollective(const Rank& v) {
  expectInfoMatchesLayout(v);  // the job's groups, the new ranks' own included
  Checker ck(v);
  uint64_t seed = 900;
  for (Coll coll : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce, Coll::kAllGather, Coll::kReduceScatter,
                    Coll::kAlltoAll, Coll::kGather, Coll::kScatter, Coll::kSendRecv})
    for (hetcclDataType_t dt : {hetcclInt32, hetcclFloat32}) {
      Check c;
      c.coll = coll;
      c.dt = dt;
      c.op = Op::kSum;
      c.count = 1003;
      c.root = 3;  // a new rank
      c.seed = ++seed;
      ck.run(c);
    }
}

// `check` runs on the grown communicator (Checker's host buffers by default).
inline void growTwoToFour(Rank& r, void (*check)(const Rank&) = checkEveryCollective) {
  hetcclComm_t pair = runningPair(r);
  hetcclUniqueId id{};
  if (r.rank == 0) HC_ASSERT_OK(hetcclCommGetUniqueId(pair, &id), pair);
  id = shareId(r, id);
  hetcclComm_t grown = nullptr;
  r.progress("hetcclCommGrow");
  if (r.rank < 2) {
    HC_ASSERT_OK(hetcclCommGrow(pair, 4, r.rank == 0 ? &id : nullptr, -1, &grown, nullptr), pair);
  } else {
    hetcclConfig_t cfg = newRankConfig(r);
    HC_ASSERT_OK(hetcclCommGrow(nullptr, 4, &id, r.rank, &grown, &cfg), nullptr);
  }
  ASSERT_NE(grown, nullptr);
  int n = -1, me = -1;
  HC_EXPECT_OK(hetcclCommCount(grown, &n), grown);
  HC_EXPECT_OK(hetcclCommUserRank(grown, &me), grown);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(me, r.rank) << "running ranks keep their numbers, new ranks take theirs";
  Rank v = r;
  v.comm = grown;
  v.scope = "grown: ";
  check(v);
  // The parent stays usable until it is destroyed.
  if (pair) {
    float x = 1.0f;
    DeviceBuffer b(r, sizeof(x));
    b.upload(&x, sizeof(x));
    HC_EXPECT_OK(hetcclAllReduce(b.get(), b.get(), 1, hetcclFloat32, hetcclSum, pair, r.stream), pair);
    syncStream(r);
    b.download(&x, sizeof(x));
    EXPECT_EQ(x, 2.0f);
  }
  HC_EXPECT_OK(hetcclCommDestroy(grown), nullptr);
  if (pair) HC_EXPECT_OK(hetcclCommDestroy(pair), nullptr);
}

}  // namespace hmp
