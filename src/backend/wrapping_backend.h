// A group backend around another. Every collective and send/recv reaches
// one virtual, route(), as a call that can run on any backend and stream;
// the wrapper runs it its way (counted and timed: observe/observed.h), holds it
// (the vendor calls that must come after the proxy's: algorithm/
// vendor_calls.h), or lets the default run it on the inner backend. A
// wrapper that needs each collective's buffers itself (the staged one,
// which copies them to device scratch) overrides the collectives instead.
// name(), abort() and the asynchronous error are the inner backend's.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace hetccl {

struct BackendCall {
  const char* what;  // "AllReduce", "Send", ...
  size_t elements;   // the payload as the metrics count it (AllGather, ReduceScatter: every rank's)
  DataType dt;
  std::function<void(Backend&, Stream)> run;  // the call, on a backend and a stream
};

class WrappingBackend : public Backend {
 public:
  const char* name() const override { return inner_.name(); }
  void abort() override { inner_.abort(); }
  hetcclResult_t asyncError() override { return inner_.asyncError(); }
  std::string asyncErrorText() override { return inner_.asyncErrorText(); }
  void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) override;
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                     Stream s) override;
  void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) override;
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) override;
  void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root, Stream s) override;
  void reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                           const ReduceOp& op, Stream s) override;
  void allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) override;
  void send(const void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void recv(void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void groupStart() override { inner_.groupStart(); }
  void groupEnd() override { inner_.groupEnd(); }

 protected:
  WrappingBackend(Backend& inner, const BackendContext& ctx) : Backend(ctx), inner_(inner) {}
  virtual void route(BackendCall call, Stream s) { call.run(inner_, s); }
  Backend& inner_;
};

}  // namespace hetccl
