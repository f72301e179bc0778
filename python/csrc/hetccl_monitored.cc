// monitored_barrier for the hetccl torch backend. It goes through the c10d
// store, not the communicator, so that a rank that never arrives (hung,
// crashed, or stuck in another collective) is named instead of waited for.
#include <thread>

#include "hetccl_backend.h"

namespace hetccl_torch {

void HetcclBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  using Clock = std::chrono::steady_clock;
  const std::chrono::milliseconds limit = opts.timeout.count() >= 0 ? opts.timeout : timeout_;
  const uint64_t k = monitoredBarriers_++;
  auto key = [&](uint64_t call, const std::string& who) {
    return storePrefix_ + "mb_" + std::to_string(call) + "_" + who;
  };
  const std::string release = key(k, "release");
  if (rank_ != 0) {
    store_->set(key(k, std::to_string(rank_)), std::vector<uint8_t>{1});
    try {
      store_->wait({release}, limit);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, msg("hetccl monitored_barrier: rank ", rank_, " was not released by rank 0 within ",
                             limit.count(), " ms (rank 0 names the ranks that did not arrive): ", e.what()));
    }
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) missing.push_back(r);
  const auto deadline = Clock::now() + limit;
  for (;;) {
    std::vector<int> still;
    for (int r : missing)
      if (!store_->check({key(k, std::to_string(r))})) still.push_back(r);
    missing.swap(still);
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      std::string who;
      for (size_t i = 0; i < missing.size() && (waitAllRanks || i == 0); ++i)
        who += (i ? ", " : "") + std::to_string(missing[i]);
      TORCH_CHECK(false, msg("hetccl monitored_barrier: ", waitAllRanks && missing.size() > 1 ? "ranks " : "rank ", who,
                             " did not reach the barrier within ", limit.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(missing.size() == 1 ? 1 : 5));
  }
  // Every rank has left the previous call's wait before it arrived at this
  // one: that call's keys can go.
  for (int r = 1; r < size_; ++r) store_->deleteKey(key(k, std::to_string(r)));
  if (k > 0) store_->deleteKey(key(k - 1, "release"));
  store_->set(release, std::vector<uint8_t>{1});
}

}  // namespace hetccl_torch
