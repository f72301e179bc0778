#include "hetccl_work.h"

#include "hetccl_backend.h"

#include <algorithm>
#include <thread>

#include <ATen/core/jit_type.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

namespace hetccl_torch {

namespace {
constexpr std::chrono::milliseconds kNoTimeout{0};  // torch's "no timeout given"
}  // namespace

CommHandle::~CommHandle() {
  if (!comm) return;
  // A failed communicator cannot finish its pending work: abort instead of
  // waiting on peers that may be gone.
  hetcclResult_t async = hetcclSuccess;
  if (hetcclCommGetAsyncError(comm, &async) != hetcclSuccess || (async != hetcclSuccess && async != hetcclInProgress)) {
    hetcclCommAbort(comm);
    return;
  }
  if (hetcclCommFinalize(comm) != hetcclSuccess) {
    hetcclCommAbort(comm);
    return;
  }
  hetcclCommDestroy(comm);
}

void checkAsyncError(hetcclComm_t comm, const std::string& what) {
  hetcclResult_t async = hetcclSuccess;
  hetcclResult_t r = hetcclCommGetAsyncError(comm, &async);
  if (r != hetcclSuccess) async = r;
  TORCH_CHECK(
      async == hetcclSuccess || async == hetcclInProgress,
      msg("hetccl ", what, ": the communicator failed: ", hetcclGetErrorString(async), ": ", hetcclGetLastError(comm)));
}

void hostWaitEvent(const c10::Event& event, hetcclComm_t comm, std::chrono::milliseconds timeout,
                   const std::string& what) {
  auto start = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(2);
  while (!event.query()) {
    checkAsyncError(comm, what);
    TORCH_CHECK(std::chrono::steady_clock::now() - start < timeout,
                msg("hetccl ", what, ": not complete after ", timeout.count(),
                    " ms (the process group's timeout); a peer may have stopped or hung"));
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(500));
  }
  checkAsyncError(comm, what);
}

namespace {
// The devices the future's value lives on: the side stream's, and those of
// GPU tensors handed back by a host rank (staged collectives).
std::vector<c10::Device> devicesOf(const c10::optional<c10::Stream>& s, const std::vector<at::Tensor>& outputs) {
  std::vector<c10::Device> d;
  if (s) d.push_back(s->device());
  for (const at::Tensor& t : outputs)
    if (t.defined() && !t.is_cpu() && std::find(d.begin(), d.end(), t.device()) == d.end()) d.push_back(t.device());
  return d;
}
}  // namespace

HetcclWork::HetcclWork(int rank, c10d::OpType op, std::string name, std::vector<at::Tensor> outputs,
                       std::shared_ptr<CommHandle> comm, std::shared_ptr<c10::Event> done,
                       c10::optional<c10::Stream> stream, bool hostWait, std::chrono::milliseconds timeout,
                       bool deferred)
    : c10d::Work(rank, op),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      comm_(std::move(comm)),
      done_(std::move(done)),
      stream_(done_ ? stream : c10::nullopt),
      hostWait_(hostWait),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       devicesOf(stream_, outputs_))),
      pending_(deferred) {
  if (!pending_) markFuture();
}

void HetcclWork::markFuture() {
  if (stream_) {
    // The future records its own events on the side stream: whoever uses the
    // value later waits for the operation in stream order (DDP's comm hooks).
    c10::StreamGuard guard(*stream_);
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  if (!done_) {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
  }
}

void HetcclWork::release() {
  if (!pending_) return;
  pending_ = false;
  markFuture();
}

void HetcclWork::fail(std::exception_ptr why) {
  if (!pending_) return;
  pending_ = false;
  failed_ = why;
  future_->setError(why);
  std::lock_guard<std::mutex> lock(mutex_);
  completed_ = true;
}

void HetcclWork::checkIssued() {
  TORCH_CHECK(!pending_, msg("hetccl ", name_,
                             ": waited on inside its coalescing block; wait on the Work the block's "
                             "end returns (or after the block)"));
  if (failed_) std::rethrow_exception(failed_);
}

bool HetcclWork::isCompleted() {
  if (pending_) return false;
  if (failed_) return true;
  if (!done_) return true;
  if (!done_->query()) return false;
  checkAsyncError(comm_->comm, name_);
  return true;
}

void HetcclWork::blockCurrentStream() {
  c10::impl::VirtualGuardImpl impl(stream_->device_type());
  done_->block(impl.getStream(stream_->device()));
}

bool HetcclWork::wait(std::chrono::milliseconds timeout) {
  checkIssued();
  if (!done_) return true;
  if (hostWait_ || timeout != kNoTimeout)
    hostWaitEvent(*done_, comm_->comm, timeout == kNoTimeout ? timeout_ : timeout, name_);
  else
    checkAsyncError(comm_->comm, name_);
  blockCurrentStream();
  return true;
}

void HetcclWork::synchronize() {
  checkIssued();
  if (done_) blockCurrentStream();
}

}  // namespace hetccl_torch
