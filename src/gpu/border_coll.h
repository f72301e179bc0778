// Collectives of GPU ranks across groups through the device border
// (border/device_border.h), in the caller's stream order; the calling thread
// never waits, the proxy only watches (device_border_call.h):
// - AllReduce: device_border_allreduce.h;
// - AllGather: each border peer's block crosses to the other groups by the
//   copy engines (out to its shared segment, in from every peer's straight
//   into the receive buffer); inside each group the vendor library then
//   exchanges the blocks each rank brought in (grouped send/recv);
// - Broadcast: the root's data crosses once, to the rank of the root's
//   group index in every other group, which then broadcasts it in its
//   group through the vendor library;
// - ReduceScatter: each rank copies out the blocks the other border peers
//   own, copies in its own block from every peer and folds them on the
//   GPU; with groups of several ranks the vendor library first reduces,
//   piece by piece, inside the group the blocks each rank carries across;
// - AlltoAll: each block crosses once, out of the sender's buffer and
//   (groups of one rank) into the receiver's; with groups of several ranks
//   to the sender's border peer in the receiver's group, which hands it on
//   through the vendor library;
// - PreMulSum and float Avg (ReduceScatter, Reduce, AllReduce): the scale
//   kernel scales each input first (groups of one rank; AllReduce always),
//   or the vendor library's PreMulSum in the group steps; the border sums.
//   A scalar in device memory, integer PreMulSum and (groups of several
//   ranks) fp8 stage;
// - Reduce: every group reduces (the vendor library, piece by piece) to its
//   rank of the root's index, whose pieces cross to the root, which folds;
// - Gather and Scatter: each block crosses once, between the root's buffer
//   and the other rank's; with groups of several ranks through each
//   group's rank of the root's index, which gathers from or hands to its
//   group through the vendor library.
// Groups of different sizes take it for AllReduce (shares of the smallest
// group's size; a larger group's ranks from that index on join the group
// steps only), for Broadcast and Reduce (a root of such an index first
// broadcasts in its group, whose rank 0 carries the buffer across; its
// group's rank 0 collects a Reduce and hands each piece to it), for
// AllGather and ReduceScatter without a PreMulSum (lanes of index mod that
// size: enqueueUnequalAllGather, enqueueUnequalReduceScatter), for Gather
// and Scatter (one lane: the root's index, or 0 whose rank of the root's
// group hands over to the root; enqueueUnequalGather, enqueueUnequalScatter)
// for AlltoAll (lanes: each lane's rank carries its lane's
// blocks; enqueueUnequalAlltoAll) and for send/recv between ranks of one
// index.
// Send/recv and the other cases stage through pinned memory (enqueue.h).
#pragma once

#include "algorithm/coll.h"

namespace hetccl {

class Comm;

// Whether `a` goes through the device border on this communicator: the
// same answer on every rank. Throws (hetcclInvalidArgument) where it would
// but this rank's buffers overlap without being in place: staging alone
// would leave the other ranks waiting on the border.
bool takesDeviceBorder(Comm& c, const CollArgs& a);
// Enqueues `a`, which takesDeviceBorder, on its stream.
void enqueueDeviceBorder(Comm& c, const CollArgs& a);

}  // namespace hetccl
