#include "core/workers.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/settings.h"

namespace hetccl {
namespace {

constexpr int kMaxThreads = 64;  // HETCCL_HOST_THREADS allows up to this

class Pool {
 public:
  // Runs the job; false (nothing run) when another job holds the pool.
  bool tryRun(int nparts, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    grow(nparts - 1);
    {
      std::lock_guard<std::mutex> l(m_);
      job_ = &fn;
      nparts_ = nparts;
      next_.store(0, std::memory_order_relaxed);
      remaining_ = nparts;
      err_ = nullptr;
      ++gen_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> l(m_);
    done_.wait(l, [&] { return remaining_ == 0 && joined_ == 0; });
    job_ = nullptr;
    std::exception_ptr e = err_;
    err_ = nullptr;
    l.unlock();
    if (e) std::rethrow_exception(e);
    return true;
  }

 private:
  void grow(int want) {
    want = std::min(want, kMaxThreads - 1);
    for (; nthreads_ < want; ++nthreads_) std::thread([this] { helper(); }).detach();  // lives as long as the process
  }

  // Claims and runs parts of the current job until none is left.
  void work() {
    for (;;) {
      int p = next_.fetch_add(1, std::memory_order_relaxed);
      if (p >= nparts_) return;
      std::exception_ptr e;
      try {
        (*job_)(p);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> l(m_);
      if (e && !err_) err_ = e;
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  void helper() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(m_);
        wake_.wait(l, [&] { return gen_ != seen; });
        seen = gen_;
        if (!job_) continue;  // that job finished before this thread woke
        ++joined_;            // the job stays current until this thread leaves
      }
      work();
      std::lock_guard<std::mutex> l(m_);
      if (--joined_ == 0 && remaining_ == 0) done_.notify_all();
    }
  }

  std::mutex busy_;  // one job at a time
  std::mutex m_;
  std::condition_variable wake_, done_;
  uint64_t gen_ = 0;
  const std::function<void(int)>* job_ = nullptr;
  int nparts_ = 0;
  std::atomic<int> next_{0};
  int remaining_ = 0;  // parts not finished
  int joined_ = 0;     // helpers inside the current job
  std::exception_ptr err_;
  int nthreads_ = 0;
};

// The process's pool. A child forked after the pool started has none of its
// threads (and may have inherited a held lock): it gets a pool of its own.
Pool& pool() {
  static std::mutex m;
  static Pool* p = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> l(m);
  if (!p || owner != getpid()) {
    p = new Pool;  // never destroyed: helpers may still wait on it at exit
    owner = getpid();
  }
  return *p;
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return std::max(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), 1);
}

}  // namespace

int hostThreadsFor(int localRanks) {
  int64_t set = settings::kHostThreads.get();
  if (set > 0) return static_cast<int>(set);  // the table bounds it by kMaxThreads
  return std::clamp(usableCores() / std::max(localRanks, 1), 1, 8);
}

void runParts(int nparts, const std::function<void(int part)>& fn) {
  if (nparts <= 0) return;
  if (nparts > 1 && pool().tryRun(nparts, fn)) return;
  std::exception_ptr first;
  for (int p = 0; p < nparts; ++p) {
    try {
      fn(p);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace hetccl
