// The Work of one hetccl_torch operation: already complete (host ranks,
// staged operations) or complete when an event on the backend's side stream
// fires (GPU ranks).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <hetccl/hetccl.h>

namespace hetccl_torch {

struct CommHandle;  // hetccl_backend.h

// Raises (a c10::Error) when the communicator has failed asynchronously.
void checkAsyncError(hetcclComm_t comm, const std::string& what);

class HetcclWork : public c10d::Work {
 public:
  // done == nullptr: the operation has completed. Otherwise it completes when
  // `done` (recorded on `stream`) fires; hostWait makes wait() block the
  // calling thread too (barrier), not only the current stream.
  // deferred: an operation of an open coalescing block, issued when the
  // block ends; until release() (or fail()) it is not complete and wait()
  // raises.
  HetcclWork(int rank, c10d::OpType op, std::string name, std::vector<at::Tensor> outputs,
             std::shared_ptr<CommHandle> comm, std::shared_ptr<c10::Event> done, c10::optional<c10::Stream> stream,
             bool hostWait, std::chrono::milliseconds timeout, bool deferred = false);
  void release();                     // the block was issued: complete as a normal Work
  void fail(std::exception_ptr why);  // the block failed to issue

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void blockCurrentStream();
  void markFuture();
  void checkIssued();
  bool pending_ = false;  // deferred and not yet released
  std::exception_ptr failed_;
  std::string name_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<CommHandle> comm_;
  std::shared_ptr<c10::Event> done_;
  c10::optional<c10::Stream> stream_;
  bool hostWait_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Waits on the host until `event` has fired, at most `timeout`; raises
// naming `what` on timeout or when the communicator failed meanwhile.
void hostWaitEvent(const c10::Event& event, hetcclComm_t comm, std::chrono::milliseconds timeout,
                   const std::string& what);

}  // namespace hetccl_torch
