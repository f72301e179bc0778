// The proxy: one thread per communicator that runs work in submission order
// so the caller does not wait. It runs the border steps of device ranks
// (which must not block the caller's thread) and every call of a
// non-blocking communicator (hetcclConfig_t.blocking = 0), init included.
// The first job that fails makes the proxy's error sticky; later jobs are
// dropped, as the communicator is then in an unknown state.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hetccl/hetccl.h"

namespace hetccl {

class Proxy {
 public:
  Proxy() = default;
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // Queues a job; starts the thread on first use. Never blocks. `finally`
  // runs after the job whether it ran, failed or was dropped (a GPU rank's
  // completion signal: a caller's stream waits on it).
  void submit(std::function<void()> job, std::function<void()> finally = {});
  // hetcclInProgress while jobs are queued or running, else the first
  // failure's code, else hetcclSuccess.
  hetcclResult_t status() const;
  // The first failure's code, else hetcclSuccess: status() without its
  // lock, for the check every call makes.
  hetcclResult_t failure() const { return failed_.load(std::memory_order_acquire); }
  std::string errorText() const;
  // Waits until no job is queued or running (each job is bounded by the
  // communicator's timeout and abort flag).
  void drain();
  // Runs what is queued (each job sees the communicator's abort flag) and
  // joins the thread. The destructor calls it too.
  void stop();
  // Called (on the proxy thread) with the code and text of a job that
  // failed, unless it was refused before it moved anything (RefusedError):
  // the communicator fails (Comm::fail). Set once, before the first job.
  void setFailureHook(std::function<void(hetcclResult_t, const std::string&)> hook) { onFailure_ = std::move(hook); }
  // Whether the calling thread is this proxy's (inside one of its jobs).
  bool onThisThread() const;

 private:
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Job {
    std::function<void()> run, finally;
  };
  std::deque<Job> jobs_;
  bool running_ = false;  // a job is executing
  bool stop_ = false;
  hetcclResult_t error_ = hetcclSuccess;
  std::atomic<hetcclResult_t> failed_{hetcclSuccess};  // error_, stored with it
  std::string errorText_;
  std::thread thread_;
  std::function<void(hetcclResult_t, const std::string&)> onFailure_;
};

}  // namespace hetccl
