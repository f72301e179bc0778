#include "transport/ofi/ofi_mr_cache.h"

#include <algorithm>

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
  if (!entries_.empty() && entries_.size() >= max_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& c) { return a.lastUse < c.lastUse; });
    fi_close(&oldest->mr->fid);
    entries_.erase(oldest);
  }
  ++registrations_;
  entries_.push_back(e);
  return entries_.back();
}

void MrCache::clear() {
  for (Entry& e : entries_) fi_close(&e.mr->fid);
  entries_.clear();
}

}  // namespace hetccl::ofi
