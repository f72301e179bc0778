// The emulated runtime's stream and event objects, which its streams
// (emu_stream.cc), captures (emu_capture.cc) and graphs share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/settings.h"
#include "emu/emu_graph.h"
#include "emu/emu_state.h"

struct emuStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  bool busy = false, retired = false;
  int device = 0;
  // Unique for the process's life (emuStreamGetId): the handle, the
  // object's address, comes back once a destroyed stream's work has run.
  uint64_t id = 0;
  // Faults on demand, as set when the stream was made (its worker never
  // reads the environment).
  int64_t stallUs = 0, copyDelayUs = 0;
  // emuStreamCreateWithPriority's: kept and reported, not scheduled by
  // (each stream has a worker of its own, so none waits for another's).
  int priority = 0;

  explicit emuStream(int dev)
      : device(dev),
        stallUs(emu::setting(hetccl::settings::kEmuStallUs)),
        copyDelayUs(emu::setting(hetccl::settings::kEmuCopyDelayUs)) {}

  // The worker holds the stream until it has run everything and was
  // retired; so do those that synchronise with it.
  static std::shared_ptr<emuStream> make(int dev) {
    static std::atomic<uint64_t> ids{0};
    auto s = std::make_shared<emuStream>(dev);
    s->id = ids.fetch_add(1) + 1;
    std::thread([s] { s->run(); }).detach();
    return s;
  }

  // Stream capture (emuStreamBeginCapture): 0 none, 1 active, 2
  // invalidated; the mode and thread that began it; the graph it records
  // into and its lane there (0: the capture began on this stream). Guarded
  // by mu.
  int captureStatus = 0, captureMode = 0;
  std::thread::id captureThread;
  emuGraph* captureGraph = nullptr;
  int captureLane = 0;

  bool isCapturing() {
    std::lock_guard<std::mutex> g(mu);
    return captureStatus != 0;
  }

  void push(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> g(mu);
      if (captureStatus) {  // recorded into the capture's graph (dropped once it is invalidated)
        if (captureStatus == 1 && captureGraph) emu::graphAddWork(captureGraph, captureLane, std::move(op));
        return;
      }
      ops.push_back(std::move(op));
    }
    cv.notify_all();
  }
  bool idle() {
    std::lock_guard<std::mutex> g(mu);
    return ops.empty() && !busy;
  }
  void drain() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [this] { return ops.empty() && !busy; });
  }
  // As cudaStreamDestroy: returns at once; the work enqueued still runs,
  // then the worker frees the stream.
  void retire() {
    {
      std::lock_guard<std::mutex> g(mu);
      retired = true;
    }
    cv.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [this] { return retired || !ops.empty(); });
      if (ops.empty()) break;  // retired, and nothing left
      std::function<void()> op = std::move(ops.front());
      ops.pop_front();
      busy = true;
      l.unlock();
      // HETCCL_EMU_STALL_US: every operation starts late (a slow device).
      if (stallUs > 0) std::this_thread::sleep_for(std::chrono::microseconds(stallUs));
      op();
      l.lock();
      busy = false;
      cv.notify_all();
    }
  }
};

// An event: its records are numbered, and each completes on its own, as on
// CUDA: a stream that waits on an event waits for the record made last
// before the wait, even where the event was recorded again since on another
// stream whose work ran first. Held by the caller and by every stream
// operation that names it: destroying an event whose recorded work is still
// pending returns at once, and it goes once that work has run (as
// cudaEventDestroy).
struct emuEvent {
  bool timed = true;  // not created with emuEventDisableTiming
  std::atomic<int> refs{1};
  emuEvent* retain() {
    refs.fetch_add(1);
    return this;
  }
  void release() {
    if (refs.fetch_sub(1) == 1) delete this;
  }
  uint64_t record() {  // a new record, pending; its number
    std::lock_guard<std::mutex> g(m);
    pending.insert(++recorded);
    return recorded;
  }
  void complete(uint64_t n, int64_t ns) {
    std::lock_guard<std::mutex> g(m);
    pending.erase(n);
    if (n > lastDone) {
      lastDone = n;
      doneNs = ns;
    }
  }
  uint64_t last() {  // the last record's number (0: never recorded)
    std::lock_guard<std::mutex> g(m);
    return recorded;
  }
  bool done(uint64_t n) {
    std::lock_guard<std::mutex> g(m);
    return pending.count(n) == 0;
  }
  // Where the last record was made inside a capture (capture 0: it was not).
  emu::CapturedRecord captured() {
    std::lock_guard<std::mutex> g(m);
    return captured_;
  }
  void setCaptured(const emu::CapturedRecord& r) {
    std::lock_guard<std::mutex> g(m);
    captured_ = r;
  }
  // Steady clock when the last record completed; -1 while it is pending or
  // where the event was never recorded.
  int64_t lastDoneNs() {
    std::lock_guard<std::mutex> g(m);
    return recorded == 0 || pending.count(recorded) ? -1 : doneNs;
  }

 private:
  std::mutex m;
  uint64_t recorded = 0, lastDone = 0;
  std::set<uint64_t> pending;
  int64_t doneNs = 0;
  emu::CapturedRecord captured_;
};

namespace emu {

emuStream* resolve(emuStream_t s);
// Streams being captured (their own and joined ones), guarded by
// captureMu(), which is taken before any stream's mu.
std::mutex& captureMu();
std::vector<emuStream*>& capturing();
// CUDA's rule for potentially unsafe calls (event queries among them):
// refused where this thread has a capture under way not begun relaxed, or,
// in global mode, where another thread has one begun in global mode; the
// capture is then invalidated (its end fails).
bool unsafeDuringCapture();
// A stream wait on an event where either side is in a capture: the wait
// recorded into the capture (a stream not capturing joins the capture of
// the event's record, as CUDA's cross-stream capture), or refused as CUDA
// does. emuErrorNotReady: neither is, wait as usual.
emuError_t captureWait(emuStream* s, emuEvent* event);

}  // namespace emu
