#include "device/captured_registry.h"

namespace hetccl {

CapturedRegistry::~CapturedRegistry() {
  close();
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    shared_->gone = true;
    for (auto& [bytes, b] : shared_->spare) shared_->toFree.push_back(b);
    shared_->spare.clear();
  }
  reclaim();  // outside the lock: freeing may wait for streams whose host functions take it
}

void CapturedRegistry::close() {
  std::lock_guard<std::mutex> g(shared_->mu);
  shared_->open = false;
  for (volatile uint64_t* f : shared_->flags)
    __atomic_store_n(const_cast<uint64_t*>(f), kFlagReleased, __ATOMIC_RELEASE);
}

// Outside the lock: freeing pinned memory may wait for streams whose host
// functions take it.
void CapturedRegistry::reclaim() {
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    blocks.swap(shared_->toFree);
  }
  for (void* b : blocks) dev_.freePinned(b);
}

void* CapturedRegistry::takeSpare(size_t bytes, size_t* got) {
  std::lock_guard<std::mutex> g(shared_->mu);
  auto it = shared_->spare.lower_bound(bytes);
  if (it == shared_->spare.end()) return nullptr;
  *got = it->first;
  void* b = it->second;
  shared_->spare.erase(it);
  return b;
}

bool CapturedRegistry::captureSeen() const {
  std::lock_guard<std::mutex> g(shared_->mu);
  return shared_->captureSeen;
}

}  // namespace hetccl
