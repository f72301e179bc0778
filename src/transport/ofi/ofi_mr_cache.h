// The ofi transport's registrations of receive buffers for remote writes
// (the RMA path): a buffer received into call after call is registered once.
//
// What it assumes: an entry is found by virtual address range, so it stays
// right only where the provider reaches memory by virtual address at the
// time of the write (the software providers: tcp, shm, sockets, udp copy
// into the receiving process by address) and pins nothing. A provider that
// pins pages (efa, cxi, verbs) would keep writing into the old pages of a
// buffer the program freed and allocated again at the same address; with
// those the transport empties the cache after every run (keepAcrossRuns
// false) and leaves reuse to the provider's own cache, which watches for
// memory given back to the system. The sender writes only within what the
// receiver announced for the current receive, so an entry larger than it
// is never written outside that receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <rdma/fabric.h>

namespace hetccl::ofi {

class MrCache {
 public:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    fid_mr* mr = nullptr;
    uint64_t lastUse = 0;
  };
  using RegisterFn = std::function<fid_mr*(const void* p, size_t n)>;

  // At most maxEntries registrations are kept between runs; the least
  // recently used goes first. Within a run none that the run used goes (its
  // offer is out: the peer may be writing into it), so a run of more
  // receives than that grows the cache until the run's end.
  MrCache(size_t maxEntries, bool keepAcrossRuns) : max_(maxEntries), keep_(keepAcrossRuns) {}
  ~MrCache() { clear(); }
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // The entry covering [p, p + n), registered with `reg` where none does.
  // The reference holds until the next call.
  const Entry& find(const void* p, size_t n, const RegisterFn& reg);
  // A run ended: empties the cache unless it keeps entries across runs,
  // else trims it to maxEntries.
  void runEnded();
  // Closes every registration (after a failed run: no late write lands in a buffer given back).
  void clear();
  size_t size() const { return entries_.size(); }
  uint64_t registrations() const { return registrations_; }  // made since the start

 private:
  size_t max_;
  bool keep_;
  uint64_t clock_ = 0;
  uint64_t runStart_ = 0;  // entries used after this belong to the current run
  uint64_t registrations_ = 0;
  std::vector<Entry> entries_;
  // Closes the least recently used entry of those last used before
  // `before`; false where there is none.
  bool evictOldest(uint64_t before);
};

}  // namespace hetccl::ofi
