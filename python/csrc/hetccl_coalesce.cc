// Coalescing blocks of the hetccl torch backend: every operation between
// startCoalescing and endCoalescing is one hetccl group, issued when the
// block ends. Their Works complete with the block; waiting on one before the
// block ends is an error, not a hang.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include "hetccl_backend.h"

namespace hetccl_torch {

c10::intrusive_ptr<c10d::Work> HetcclBackend::launchCoalesced(c10d::OpType op, const char* name,
                                                              const std::vector<at::Tensor*>& touched,
                                                              std::vector<at::Tensor> results,
                                                              std::vector<std::pair<at::Tensor, at::Tensor*>>& copyBack,
                                                              const Issue& issue) {
  Coalescing& blk = *coalescing_;
  if (gpu_) {
    c10::DeviceGuard guard(*gpu_);
    issueOnSideStream(touched, issue);  // queued in the hetccl group until the block ends
  } else {
    issue(nullptr);
  }
  if (!copyBack.empty()) {  // staged outputs: copied back when the block has run
    results.clear();
    for (auto& [user, slot] : copyBack) {
      blk.copyBack.emplace_back(user, *slot);
      results.push_back(user);
    }
  }
  for (const at::Tensor& t : results) blk.outputs.push_back(t);
  auto w = c10::make_intrusive<HetcclWork>(rank_, op, name, results, comm_, copyBack.empty() ? blk.done : nullptr,
                                           stream_, false, timeout_, /*deferred=*/true);
  blk.works.push_back(w);
  return w;
}

#if HETCCL_TORCH2
void HetcclBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "hetccl: startCoalescing inside an open coalescing block");
  auto blk = std::make_unique<Coalescing>();
  if (gpu_) blk->done = std::make_shared<c10::Event>(at::kCUDA);
  check(hetcclGroupStart(), "startCoalescing");
  coalescing_ = std::move(blk);
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "hetccl: endCoalescing without startCoalescing");
  std::unique_ptr<Coalescing> blk = std::move(coalescing_);
  try {
    c10::OptionalDeviceGuard guard(gpu_);
    check(hetcclGroupEnd(), "coalesced operations");
    if (gpu_) {
      blk->done->record(*stream_);
      if (!blk->copyBack.empty()) hostWaitEvent(*blk->done, comm(), timeout_, "coalesced operations");
    }
    for (auto& [user, staged] : blk->copyBack) user.copy_(staged);
  } catch (...) {
    for (auto& w : blk->works) w->fail(std::current_exception());
    throw;
  }
  for (auto& w : blk->works) w->release();
  const bool async = gpu_ && blk->copyBack.empty();
  return c10::make_intrusive<HetcclWork>(rank_, c10d::OpType::COALESCED, "coalesced operations", blk->outputs, comm_,
                                         async ? blk->done : nullptr, async ? stream_ : c10::nullopt, false, timeout_);
}
#endif

}  // namespace hetccl_torch
