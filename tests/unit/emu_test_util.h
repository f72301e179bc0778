// What the emulated runtime's unit tests share.
#pragma once

#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>

#include "emu/emu_runtime.h"

namespace emu_test {

// A gate a stream operation waits behind until the test opens it.
class Gate {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> g(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A stream of the emulated runtime, synchronised and destroyed at scope end:
// its work may name the test's locals, so it is done before they go.
struct Stream {
  emuStream_t s = nullptr;
  Stream() { EXPECT_EQ(emuStreamCreateWithFlags(&s, 0), emuSuccess); }
  ~Stream() {
    emuStreamSynchronize(s);
    emuStreamDestroy(s);
  }
};

}  // namespace emu_test
