#include "comm/proxy.h"

#include "observe/observed.h"

#include "core/error.h"
#include "core/log.h"

namespace hetccl {

namespace {
thread_local const Proxy* tRunning = nullptr;  // the proxy whose thread this is
}  // namespace

Proxy::~Proxy() { stop(); }

bool Proxy::onThisThread() const { return tRunning == this; }

void Proxy::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Proxy::submit(std::function<void()> job, std::function<void()> finally) {
  std::lock_guard<std::mutex> g(mu_);
  jobs_.push_back(Job{std::move(job), std::move(finally)});
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

hetcclResult_t Proxy::status() const {
  std::lock_guard<std::mutex> g(mu_);
  if (error_ != hetcclSuccess) return error_;
  return (running_ || !jobs_.empty()) ? hetcclInProgress : hetcclSuccess;
}

std::string Proxy::errorText() const {
  std::lock_guard<std::mutex> g(mu_);
  return errorText_;
}

void Proxy::drain() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return !running_ && jobs_.empty(); });
}

void Proxy::loop() {
  tRunning = this;
  StepScope steps;  // for GPU calls across groups: see takeStepTally
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping and nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    if (error_ != hetcclSuccess) {  // sticky: drop work after a failure
      // Outside the lock, as a job's own end: a finally may take locks of
      // its own under which others submit (the captured calls' registry).
      running_ = true;
      l.unlock();
      if (job.finally) job.finally();
      l.lock();
      running_ = false;
      cv_.notify_all();
      continue;
    }
    running_ = true;
    l.unlock();
    hetcclResult_t code = hetcclSuccess;
    std::string text;
    bool refused = false;
    try {
      job.run();
    } catch (const RefusedError& e) {
      code = e.code();
      text = e.what();
      refused = true;
    } catch (const Error& e) {
      code = e.code();
      text = e.what();
    } catch (const std::exception& e) {
      code = hetcclInternalError;
      text = e.what();
    }
    if (code != hetcclSuccess && !refused && onFailure_) onFailure_(code, text);
    if (job.finally) job.finally();
    l.lock();
    running_ = false;
    if (code != hetcclSuccess && error_ == hetcclSuccess) {
      error_ = code;
      errorText_ = text;
      failed_.store(code, std::memory_order_release);
      LOG_WARN(kColl, "proxy: %s", text.c_str());
    }
    cv_.notify_all();
  }
}

}  // namespace hetccl
