// Helpers shared by the tests of ranks on emulated GPUs (test_emu*.cc).
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace hmp {

// base + step * (i mod 4093): distinct small values that stay exact in float.
inline std::vector<int32_t> iota(size_t n, int32_t base, int32_t step) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + step * static_cast<int32_t>(i % 4093);
  return v;
}

inline std::vector<int32_t> readBack(const DeviceBuffer& b, size_t n) {
  std::vector<int32_t> v(n);
  b.download(v.data(), n * 4);
  return v;
}

inline std::vector<float> readFloats(const DeviceBuffer& b, size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * 4);
  return v;
}

// What hetcclCommGetInfo reports for r.comm (zeros where it fails, with a
// failure recorded).
inline hetcclCommInfo_t infoOf(const Rank& r) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  hetcclResult_t res = hetcclCommGetInfo(r.comm, &info);
  EXPECT_EQ(res, hetcclSuccess) << hetcclGetLastError(r.comm);
  return info;
}

// One AllReduce of one int32, checked: the communicator works.
inline void warmUp(const Rank& r) {
  DeviceBuffer b(r, 4);
  int32_t one = 1;
  b.upload(&one, 4);
  HC_ASSERT_OK(hetcclAllReduce(b.get(), b.get(), 1, hetcclInt32, hetcclSum, r.comm, r.stream), r.comm);
  syncStream(r);
  b.download(&one, 4);
  EXPECT_EQ(one, r.nranks);
}

// After a call (returned `res`) whose peer is gone: the stream must come
// back, and the failure may reach the communicator a moment after the
// stream went on, so this waits until the call or the communicator reports
// one, up to `limitS` seconds from t0. Returns the error text, "" where
// neither failed.
inline std::string awaitFailure(const Rank& r, hetcclResult_t res, std::chrono::steady_clock::time_point t0,
                                double limitS) {
  std::string text = hetcclGetLastError(r.comm);
  syncStream(r);
  hetcclResult_t async = hetcclSuccess;
  EXPECT_EQ(hetcclCommGetAsyncError(r.comm, &async), hetcclSuccess);
  while (res == hetcclSuccess && async == hetcclSuccess && secondsSince(t0) < limitS) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(hetcclCommGetAsyncError(r.comm, &async), hetcclSuccess);
  }
  if (res != hetcclSuccess) return text;
  return async == hetcclSuccess ? std::string() : std::string(hetcclGetLastError(r.comm));
}

// After an abort (r.comm null): a communicator of this rank alone on the
// same device works.
inline void reopenAlone(Rank& r) {
  hetcclUniqueId id;
  HC_ASSERT_OK(hetcclGetUniqueId(&id), nullptr);
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  cfg.device = r.device.c_str();
  HC_ASSERT_OK(hetcclCommInitRankConfig(&r.comm, 1, id, 0, &cfg), nullptr);
  r.rank = 0;
  r.nranks = 1;
  warmUp(r);
}

// A rank that takes no part in what follows: waits `seconds`, then aborts
// its communicator.
inline void abortAfter(Rank& r, unsigned seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  EXPECT_EQ(hetcclCommAbort(r.comm), hetcclSuccess);
  r.comm = nullptr;
}

// With a call enqueued on r.stream that waits for a peer that never comes:
// the abort lets the stream go on at once, and a new communicator on the
// device works.
inline void abortReleasesTheStream(Rank& r) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(hetcclCommAbort(r.comm), hetcclSuccess);
  r.comm = nullptr;
  syncStream(r);
  EXPECT_LT(secondsSince(t0), 1) << "the stream waited past the abort";
  reopenAlone(r);
}

// Calls go through the device border
// (border/device_border.h, 64 KiB chunks) with `border`, else through pinned staging.
inline void borderEnv(JobOptions& o, bool border) {
  o.env.emplace_back("HETCCL_GPU_BORDER", border ? "1" : "0");
  o.env.emplace_back("HETCCL_GPU_BORDER_MIN", "0");
  o.env.emplace_back("HETCCL_GPU_BORDER_CHUNK", "65536");
}

// A function of the GPU runtime hetccl loaded for `kind` (libhetccl-emu.so,
// libcudart), found among the objects of this process by its name
// (`name` without the runtime's prefix: "LaunchHostFunc").
inline void* runtimeFunction(const std::string& kind, const std::string& name) {
  struct Find {
    const char* lib;
    std::string path;
  } f{kind == "emu" ? "libhetccl-emu.so" : "libcudart.so", ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* f = static_cast<Find*>(arg);
        if (info->dlpi_name && strstr(info->dlpi_name, f->lib)) f->path = info->dlpi_name;
        return f->path.empty() ? 0 : 1;
      },
      &f);
  if (f.path.empty()) return nullptr;
  void* lib = dlopen(f.path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  return lib ? dlsym(lib, ((kind == "emu" ? "emu" : kind == "hip" ? "hip" : "cuda") + name).c_str()) : nullptr;
}

// Holds a stream until open() or for at most kHoldS (then it opens by
// itself and says so: expired()). The host function shares the state, so
// it may outlive the gate.
class StreamGate {
 public:
  static constexpr double kHoldS = 20;
  StreamGate(const Rank& r, hetcclStream_t s) : st_(std::make_shared<State>()) {
    using Launch = int (*)(void*, void (*)(void*), void*);
    auto launch = reinterpret_cast<Launch>(runtimeFunction(r.device, "LaunchHostFunc"));
    EXPECT_NE(launch, nullptr) << "no LaunchHostFunc in the " << r.device << " runtime";
    if (!launch) return;
    auto* arg = new std::shared_ptr<State>(st_);
    if (launch(s, &StreamGate::hold, arg) != 0) {
      delete arg;
      ADD_FAILURE() << "the host function was not enqueued";
      return;
    }
    armed_ = true;
  }
  ~StreamGate() { open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  bool armed() const { return armed_; }
  void open() { st_->open.store(true); }
  // The gate gave up before open(): something waited for the stream.
  bool expired() const { return st_->expired.load(); }

 private:
  struct State {
    std::atomic<bool> open{false}, expired{false};
  };
  static void hold(void* arg) {
    std::unique_ptr<std::shared_ptr<State>> st(static_cast<std::shared_ptr<State>*>(arg));
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(kHoldS);
    while (!(*st)->open.load()) {
      if (std::chrono::steady_clock::now() > end) {
        (*st)->expired.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::shared_ptr<State> st_;
  bool armed_ = false;
};

}  // namespace hmp
