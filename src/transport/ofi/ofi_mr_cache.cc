#include "transport/ofi/ofi_mr_cache.h"

#include <rdma/fi_domain.h>

namespace hetccl::ofi {

const MrCache::Entry& MrCache::find(const void* p, size_t n, const RegisterFn& reg) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  ++clock_;
  for (Entry& e : entries_)
    if (e.begin <= b && b + n <= e.end) {
      e.lastUse = clock_;
      return e;
    }
  Entry e;
  e.begin = b;
  e.end = b + n;
  e.mr = reg(p, n);  // throws where the provider refuses: the cache stays as it was
  e.lastUse = clock_;
  if (entries_.size() >= max_) evictOldest(runStart_ + 1);
  ++registrations_;
  entries_.push_back(e);
  return entries_.back();
}

bool MrCache::evictOldest(uint64_t before) {
  auto oldest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->lastUse < before && (oldest == entries_.end() || it->lastUse < oldest->lastUse)) oldest = it;
  if (oldest == entries_.end()) return false;
  fi_close(&oldest->mr->fid);
  entries_.erase(oldest);
  return true;
}

void MrCache::runEnded() {
  if (!keep_) return clear();
  runStart_ = clock_;
  while (entries_.size() > max_ && evictOldest(clock_ + 1)) {
  }
}

void MrCache::clear() {
  for (Entry& e : entries_) fi_close(&e.mr->fid);
  entries_.clear();
}

}  // namespace hetccl::ofi
