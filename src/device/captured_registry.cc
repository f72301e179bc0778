#include "device/captured_registry.h"

namespace hetccl {

CapturedRegistry::~CapturedRegistry() {
  close();
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> g(shared_->mu);
    shared_->gone = true;
    blocks.swap(shared_->spare);
  }
  // Outside the lock: freeing pinned memory may wait for streams whose host
  // functions take it.
  for (auto& [bytes, b] : blocks) dev_.freePinned(b);
}

void CapturedRegistry::close() {
  std::lock_guard<std::mutex> g(shared_->mu);
  shared_->open = false;
  for (volatile uint64_t* f : shared_->flags)
    __atomic_store_n(const_cast<uint64_t*>(f), kFlagReleased, __ATOMIC_RELEASE);
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
