// The group backend as multi-group plans see it on a GPU rank whose plan
// runs over pinned host copies of the user's buffers (enqueue.cc): each
// group step copies its inputs to device scratch, runs the vendor library on
// the proxy's internal stream, copies the outputs back and waits (bounded).
// A one-rank group needs no library call: every collective of one rank is a
// copy, done on the host copies directly.
#pragma once

#include <vector>

#include "backend/wrapping_backend.h"
#include "device/staging.h"

namespace hetccl {

class StagedBackend : public WrappingBackend {
 public:
  StagedBackend(Backend& inner, const BackendContext& ctx, StagingState& ds);

  void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) override;
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                     Stream s) override;
  void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) override;
  void reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                           const ReduceOp& op, Stream s) override;
  void allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) override;
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) override;
  void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root, Stream s) override;
  void send(const void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void recv(void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void groupStart() override;
  void groupEnd() override;

 private:
  struct P2p {
    bool isSend;
    void* host;
    size_t count;
    DataType dt;
    int peer;
  };
  // Runs `call` on device copies: in/out are host ranges (out may be null).
  template <typename F>
  void staged(const void* in, size_t inBytes, void* out, size_t outBytes, F call);
  void flushP2p();
  void wait(const char* what);

  StagingState& ds_;
  DeviceRuntime& dev_;
  int depth_ = 0;
  std::vector<P2p> p2p_;
};

}  // namespace hetccl
