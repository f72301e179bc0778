// Send/recv of ranks on emulated GPUs between every two ranks of a job on
// one host: border peers through their pair channels, ranks of other
// indices (or of an index a smaller group lacks) through the pair links
// (border/pair_links.h), ranks of one group through the vendor library;
// none staged. And a link peer that dies under a send, and an abort while
// a send waits on a link.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emu_util.h"
#include "harness.h"

namespace hmp {
namespace {

// Every rank sends a different message to every other rank and receives
// one from each: first one group call of all of them (receives listed
// first), then separate calls with the next rank in opposite orders on the
// two sides (even ranks send first). Messages of 2.5 parts (64 KiB parts:
// more than the 4 slots of a channel over the two calls). Each call is
// counted on the path asserted: across groups the device path, inside the
// group the vendor library alone, nothing staged.
void everyPair(const char* layout, const char* devices) {
  JobOptions o;
  o.devices = parseDevices(devices);
  borderEnv(o, true);
  runJob(layout, o, [](Rank& r) {
    const int n = r.nranks, me = r.rank;
    const size_t count = 40000;
    auto value = [](int from, int to) { return from * 1000 + to * 10 + 1; };
    std::vector<std::unique_ptr<DeviceBuffer>> out, in;
    for (int p = 0; p < n; ++p) {
      out.push_back(std::make_unique<DeviceBuffer>(r, count * 4));
      in.push_back(std::make_unique<DeviceBuffer>(r, count * 4));
      out[p]->upload(iota(count, value(me, p), 7).data(), count * 4);
      std::vector<int32_t> junk(count, -1);
      in[p]->upload(junk.data(), count * 4);
    }
    HC_ASSERT_OK(hetcclGroupStart(), r.comm);
    for (int p = 0; p < n; ++p)
      if (p != me) HC_ASSERT_OK(hetcclRecv(in[p]->get(), count, hetcclInt32, p, r.comm, r.stream), r.comm);
    for (int p = 0; p < n; ++p)
      if (p != me) HC_ASSERT_OK(hetcclSend(out[p]->get(), count, hetcclInt32, p, r.comm, r.stream), r.comm);
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    syncStream(r);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      EXPECT_EQ(readBack(*in[p], count), iota(count, value(p, me), 7)) << "group call: from rank " << p;
    }

    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    std::vector<int32_t> junk(count, -1);
    in[prev]->upload(junk.data(), count * 4);
    auto send = [&] { return hetcclSend(out[next]->get(), count, hetcclInt32, next, r.comm, r.stream); };
    auto recv = [&] { return hetcclRecv(in[prev]->get(), count, hetcclInt32, prev, r.comm, r.stream); };
    if (me % 2 == 0) {
      HC_ASSERT_OK(send(), r.comm);
      HC_ASSERT_OK(recv(), r.comm);
    } else {
      HC_ASSERT_OK(recv(), r.comm);
      HC_ASSERT_OK(send(), r.comm);
    }
    syncStream(r);
    EXPECT_EQ(readBack(*in[prev], count), iota(count, value(prev, me), 7)) << "separate calls: from rank " << prev;

    unsigned long long inGroup = 0, across = 0;
    for (int p = 0; p < n; ++p)
      if (p != me) (r.layout[p] == r.group ? inGroup : across) += 2;
    for (int p : {next, prev}) (r.layout[p] == r.group ? inGroup : across) += 1;
    hetcclCommInfo_t info = infoOf(r);
    EXPECT_EQ(info.pathCalls[hetcclPathStaged], 0ull) << "a send/recv staged";
    EXPECT_EQ(info.pathCalls[hetcclPathDevice], across) << "send/recv across groups on one host";
    EXPECT_EQ(info.pathCalls[hetcclPathNone], inGroup) << "send/recv inside the group";
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    EXPECT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
  });
}

TEST(EmuPairs, EveryPairOfTwoGroupsOfTwo) { everyPair("a,a,b,b", "emu,emu,emu,emu"); }
// Index 2 of group a has no border peer: links with both ranks of b.
TEST(EmuPairs, EveryPairOfGroupsOfThreeAndTwo) { everyPair("a,a,a,b,b", "emu,emu,emu,emu,emu"); }
TEST(EmuPairs, EveryPairOfThreeGroups) { everyPair("a,b,b,c,c,c", "emu,emu,emu,emu,emu,emu"); }

// Rank 0 sends to rank 3, another index of the other group (a pair link),
// more parts than the channel has slots, and rank 3 has exited: the call
// fails within the timeout naming rank 3, and the stream goes on.
// Group calls of messages longer than a channel holds (6 parts of 64 KiB,
// 4 slots), each rank listing its peers in an order that, taken as it is,
// closes a cycle of waits on full slots: rank 0 sends to 2 then 3, rank 1
// to 3 then 2, rank 2 receives from 1 then 0, rank 3 from 0 then 1 (0
// waits on 2, 2 on 1, 1 on 3, 3 on 0). Every message arrives.
TEST(EmuPairs, GroupCallsOfLongMessagesInAnyPeerOrder) {
  JobOptions o;
  o.devices = parseDevices("emu,emu,emu,emu");
  o.env.emplace_back("HETCCL_TIMEOUT_S", "20");
  borderEnv(o, true);
  runJob("a,a,b,b", o, [](Rank& r) {
    const size_t count = 6 * 16384 + 11;
    const std::vector<std::vector<int>> order = {{2, 3}, {3, 2}, {1, 0}, {0, 1}};
    const bool sends = r.rank < 2;
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    HC_ASSERT_OK(hetcclGroupStart(), r.comm);
    for (int peer : order[r.rank]) {
      bufs.push_back(std::make_unique<DeviceBuffer>(r, count * 4));
      if (sends) {
        bufs.back()->upload(iota(count, r.rank * 100 + peer, 3).data(), count * 4);
        HC_ASSERT_OK(hetcclSend(bufs.back()->get(), count, hetcclInt32, peer, r.comm, r.stream), r.comm);
      } else {
        HC_ASSERT_OK(hetcclRecv(bufs.back()->get(), count, hetcclInt32, peer, r.comm, r.stream), r.comm);
      }
    }
    HC_ASSERT_OK(hetcclGroupEnd(), r.comm);
    syncStream(r);
    hetcclResult_t async = hetcclSuccess;
    HC_EXPECT_OK(hetcclCommGetAsyncError(r.comm, &async), r.comm);
    ASSERT_EQ(async, hetcclSuccess) << hetcclGetLastError(r.comm);
    for (size_t k = 0; k < bufs.size() && !sends; ++k) {
      const int peer = order[r.rank][k];
      EXPECT_EQ(readBack(*bufs[k], count), iota(count, peer * 100 + r.rank, 3)) << "from rank " << peer;
    }
    EXPECT_EQ(infoOf(r).pathCalls[hetcclPathDevice], 2ull);
  });
}

// A job of groups a,a,b,b on emulated GPUs through the border (64 KiB
// parts), with HETCCL_TIMEOUT_S.
JobOptions twoByTwo(const char* timeoutS) {
  JobOptions o;
  o.devices = parseDevices("emu,emu,emu,emu");
  o.env.emplace_back("HETCCL_TIMEOUT_S", timeoutS);
  borderEnv(o, true);
  return o;
}

TEST(EmuPairs, LinkPeerExitsUnderASend) {
  runJob("a,a,b,b", twoByTwo("5"), [](Rank& r) {
    warmUp(r);
    if (r.rank == 3) _exit(0);
    if (r.rank != 0) return abortAfter(r, 12);   // once rank 0 has seen it fail (an abort could come first)
    const size_t count = (size_t{1} << 18) + 3;  // 17 parts of 64 KiB
    DeviceBuffer b(r, count * 4);
    auto t0 = std::chrono::steady_clock::now();
    const unsigned long long before = infoOf(r).pathCalls[hetcclPathDevice];
    hetcclResult_t res = hetcclSend(b.get(), count, hetcclFloat32, 3, r.comm, r.stream);
    EXPECT_EQ(infoOf(r).pathCalls[hetcclPathDevice], before + 1) << "the send did not take the pair link";
    const std::string text = awaitFailure(r, res, t0, 20);
    EXPECT_LT(secondsSince(t0), 20);
    EXPECT_FALSE(text.empty()) << "no failure";
    EXPECT_NE(text.find("rank 3"), std::string::npos) << "the error should name the peer: " << text;
    HC_EXPECT_OK(hetcclCommAbort(r.comm), nullptr);
    r.comm = nullptr;
  });
}

// Rank 0 sends to rank 3 over a pair link, more parts than the channel
// has slots, and rank 3 never receives: rank 0's abort lets its stream go
// on at once (not at the 30 s timeout), and a new communicator on the
// device works.
TEST(EmuPairs, AbortReleasesAStreamWaitingOnALink) {
  runJob("a,a,b,b", twoByTwo("30"), [](Rank& r) {
    warmUp(r);
    if (r.rank != 0) return abortAfter(r, 3);
    const size_t count = (size_t{1} << 18) + 3;  // 17 parts of 64 KiB
    DeviceBuffer b(r, count * 4);
    const unsigned long long before = infoOf(r).pathCalls[hetcclPathDevice];
    HC_ASSERT_OK(hetcclSend(b.get(), count, hetcclFloat32, 3, r.comm, r.stream), r.comm);
    EXPECT_EQ(infoOf(r).pathCalls[hetcclPathDevice], before + 1) << "the send did not take the pair link";
    abortReleasesTheStream(r);
  });
}

}  // namespace
}  // namespace hmp
