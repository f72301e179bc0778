// Group backend interface: the vendor library that runs collectives inside
// one group (NCCL, RCCL, any library with the NCCL ABI, or the built-in host
// backend). Its calls mirror the NCCL API one to one, so a vendor backend is
// a thin table of library functions: counts in elements, buffers in the
// group's device memory, ranks are group ranks, work ordered on `stream`.
// Semantics follow NCCL's, in-place forms included (e.g. in-place
// ReduceScatter: recv == send + groupRank * recvcount).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "device/device.h"
#include "transport/transport.h"

namespace hetccl {

class Bootstrap;

struct BackendContext {
  std::vector<int> ranks;          // the group's global ranks, ascending
  int groupRank = 0;               // this rank's index in ranks
  Bootstrap* bootstrap = nullptr;  // the communicator's; vendor backends share their unique id over it
  Transport* transport = nullptr;  // used by the host backend for its messages
  DeviceRuntime* device = nullptr;
  const MsgTag* callTag = nullptr;           // the collective in progress; host backend messages carry it
  size_t smallBytes = 64 << 10;              // below this AllReduce is one direct exchange
  const std::atomic<bool>* abort = nullptr;  // the communicator's abort flag
  double timeoutS = 300;
  // The communicator's: a non-blocking one's vendor init can be aborted.
  bool blocking = true;
  std::vector<uint8_t> vendorConfig;  // CommOptions::vendorConfig
  // By group rank: an id of its host (equal ids: one host); empty: one host.
  std::vector<int> hostOf;
};

// Size of the blob a vendor backend's group leader publishes at init (an
// ncclUniqueId is 128 bytes).
constexpr size_t kBackendIdBytes = 128;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  int nranks() const { return static_cast<int>(ctx_.ranks.size()); }
  int rank() const { return ctx_.groupRank; }
  // What it was made with (the wrappers of the group's backend take the same).
  const BackendContext& context() const { return ctx_; }

  // Init, in two steps collective over every rank of the communicator (the
  // communicator exchanges the blobs over its bootstrap): makeId fills
  // kBackendIdBytes at the group's rank 0 (vendor backends: their unique id;
  // others leave it zero), connect gets the blob of the group's rank 0.
  virtual void makeId(void* out) {}
  virtual void connect(const void* leaderId) {}
  // Releases every wait inside the library (hetcclCommAbort), connect()'s
  // included; the backend is unusable afterwards. Must be callable from any
  // thread, at any time.
  virtual void abort() {}
  // An error of enqueued work the library has detected (hetcclSuccess if none).
  virtual hetcclResult_t asyncError() { return hetcclSuccess; }
  // What that error was, as the library told it ("" where it said nothing).
  virtual std::string asyncErrorText() { return ""; }

  // `op` is applied as NCCL applies it: PreMulSum's scalar on every input,
  // then kind, then (integer Avg) the division by op.divisor. Multi-group
  // plans pass plain kinds (ReduceOp converts from RedKind); the one-group
  // path of a device rank passes the user's op whole.
  virtual void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) = 0;
  virtual void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                             Stream s) = 0;
  virtual void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) = 0;
  virtual void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                      Stream s) = 0;
  // Uneven shards: member i's shard is [bounds[i], bounds[i+1]) of a vector
  // of bounds[k] elements. reduceScatterShards reduces every member's `send`
  // (the whole vector) and writes this member's shard to `recv`;
  // allGatherShards gives every member's shard of `buf` (the whole vector,
  // in place) to all. Even bounds run the vendor's ReduceScatter/AllGather;
  // uneven ones a group of Reduce/Broadcast calls, one per member (NCCL's
  // idiom for the V forms). Wrappers forward them whole.
  virtual void reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                   const ReduceOp& op, Stream s);
  virtual void allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s);
  // Point-to-point inside the group; between groupStart/groupEnd they are
  // issued together (any order, no deadlock).
  virtual void send(const void* buf, size_t count, DataType dt, int peer, Stream s) = 0;
  virtual void recv(void* buf, size_t count, DataType dt, int peer, Stream s) = 0;
  virtual void groupStart() = 0;
  virtual void groupEnd() = 0;

 protected:
  explicit Backend(BackendContext ctx) : ctx_(std::move(ctx)) {}
  BackendContext ctx_;
};

// "host" is built in. Collective over the group's ranks. Throws
// InvalidArgument naming the known backends.
std::unique_ptr<Backend> createBackend(const std::string& name, const BackendContext& ctx);
// The group backends this build knows ("host" built in; the NCCL-ABI ones
// load their library at run time).
std::vector<std::string> backendNames();
// The backend a device kind uses by default: host -> "host", cuda -> "nccl", hip -> "rccl".
std::string defaultBackendFor(const std::string& deviceKind);

}  // namespace hetccl
