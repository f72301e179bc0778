// Border transport interface: moves bytes between ranks of one communicator.
//
// A transport owns a connection to every peer it was built for. Work is
// handed over as a batch of transfers (Xfer) that run() moves to completion
// concurrently, so any pairing of sends and receives across ranks completes
// without deadlock as long as every transfer is matched by the peer.
// Transfers with the same peer and direction are matched in the order given.
//
// Every message carries a MsgTag: the receiver checks it against what it
// expects, so a rank that called another collective, count, type or op than
// its peer gets an error naming both sides instead of wrong data.
//
// Implementations: tcp/ (sockets; any hosts), shm/ (shared-memory rings; one
// host), ucx/ (UCX: its shared-memory, tcp, InfiniBand/RoCE transports), ofi/ (libfabric: EFA, Slingshot's
// cxi, and its other providers), net/ (an installed NCCL net plugin's links). Each folder has the same file
// set: <name>_transport.{h,cc}.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/call.h"
#include "core/datatype.h"

namespace hetccl {

class Bootstrap;

struct Xfer {
  enum class Kind : uint8_t { kSend, kRecv, kRecvReduce };
  Kind kind = Kind::kSend;
  int peer = -1;              // global rank
  const void* src = nullptr;  // kSend: read; kRecvReduce: the other operand, or null for dst itself
  void* dst = nullptr;        // kRecv: written; kRecvReduce: dst = (src ? src : dst) op incoming
  size_t bytes = 0;
  DataType dtype = hetcclInt8;  // kRecvReduce
  RedKind redKind = RedKind::kSum;
  MsgTag tag;       // expected (recv) or carried (send); bytes is filled from `bytes`
  size_t done = 0;  // transport-owned progress
  // kSend: the caller leaves `src` untouched until Transport::drain(), so
  // run() may return before the peer has taken the data (shm single-copy
  // sends: the receiver reads the sender's memory). Others ignore it.
  bool lazy = false;

  static Xfer send(int peer, const void* src, size_t bytes, const MsgTag& t);
  static Xfer recv(int peer, void* dst, size_t bytes, const MsgTag& t);
  // `operand`, when given, is the other input of the fold (same length as
  // dst; it may be dst itself): saves a copy of it into dst first.
  static Xfer recvReduce(int peer, void* dst, size_t bytes, DataType dt, RedKind k, const MsgTag& t,
                         const void* operand = nullptr);
  // kRecvReduce: the fold's other input at byte offset `off`.
  const uint8_t* operand(size_t off) const { return static_cast<const uint8_t*>(src ? src : dst) + off; }
};

// What every transport is built with.
struct TransportContext {
  int rank = 0;
  int nranks = 0;
  std::vector<int> peers;          // global ranks to connect to (excluding self)
  Bootstrap* bootstrap = nullptr;  // all ranks of the communicator call create() together
  const std::atomic<bool>* abort = nullptr;
  double timeoutS = 300;
  size_t buffBytes = 4 << 20;                 // staging per peer connection
  std::vector<uint8_t> encrypt;               // by global rank: the link carries encrypted records (tcp; empty: none)
  uint64_t rekeyRecords = uint64_t{1} << 18;  // records per key (secure/record.h)
  int localRanks = 1;                         // ranks of the communicator on this host (they share its cores)
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Moves every transfer to completion. Throws hetccl::Error: RemoteError on
  // a peer that closed, a tag mismatch, no progress within the timeout (the
  // message names the operation, the peer and what it waited for), or abort.
  // After a throw the transport's connections are in an unknown state.
  virtual void run(std::span<Xfer> xfers) = 0;
  // Waits until the peers have taken the data of every lazy send that run()
  // returned before (same errors as run()). forgetLazy() drops that wait,
  // after a failed collective.
  virtual void drain() {}
  virtual void forgetLazy() {}
  // This rank's communicator has failed (`why`): the peers' waits on it end
  // at once with an error naming this rank, and their later run()s fail.
  // Callable from any thread, also while run() is in progress on another.
  // A transport that cannot tell its peers leaves them to their timeout.
  virtual void poison(const std::string& why) { (void)why; }
};

// Creates a transport by name ("tcp", "shm", "ucx", "net"). Collective over ctx.bootstrap:
// every rank must call it with the same name. Throws InvalidArgument on an
// unknown name, listing the known ones.
std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx);
std::vector<std::string> transportNames();
// Whether this rank could run the ucx transport over an RDMA device: UCX is
// built in and loads, and the kernel lists InfiniBand/RoCE devices.
bool ucxRdmaAvailable();
// The hardware provider (efa, cxi, verbs...) this rank's libfabric offers for
// the ofi transport, or "" where there is none or libfabric is absent.
std::string ofiHardwareProvider();

}  // namespace hetccl
