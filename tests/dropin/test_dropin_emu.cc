// The NCCL drop-in on GPU ranks, as an unmodified program uses it: the
// drop-in first in the global lookup (as under LD_PRELOAD), every rank a
// thread bound to its own emulated GPU (HETCCL_DEVICE=emu), buffers in
// device memory, every call on the rank's stream. The vendor library
// behind it is the emulated GPU's group library, which calls its own API
// through its PLT and refuses handles it did not make, as NCCL 2.28 does.
// One group: every call goes straight through to the vendor library.
// Several groups: hetccl crosses them through the device border (emulated
// GPUs are one GPU each: every call takes it), or, with the border from
// 1 MiB on (HETCCL_GPU_BORDER_MIN, as where two ranks share one GPU), the
// smaller calls staged through pinned memory.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "emu/emu_runtime.h"

namespace {

struct Id {
  char b[128];
};
using Comm = void*;
constexpr int kInt32 = 2, kFloat32 = 7, kSum = 0, kMax = 2;

struct Layout {
  const char* name;
  const char* groupMap;  // nullptr: one group
  const char* transport;
  const char* borderMin;  // HETCCL_GPU_BORDER_MIN, or nullptr: unset
};

class DropInEmu : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    // RTLD_GLOBAL: ahead of the vendor library in the lookup, as a preload is.
    lib_ = dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    // The emulated runtime, its group library and its kernels are found
    // where they are by default: above the drop-in's folder, beside
    // libhetccl (build/dropin/libnccl.so.2, build/libhetccl-emu*.so).
    setenv("HETCCL_DEVICE", "emu", 1);
    const Layout& l = GetParam();
    if (l.groupMap) setenv("HETCCL_GROUP_MAP", l.groupMap, 1);
    setenv("HETCCL_TRANSPORT", l.transport, 1);
    if (l.borderMin) setenv("HETCCL_GPU_BORDER_MIN", l.borderMin, 1);
  }
  void TearDown() override {
    for (const char* v : {"HETCCL_DEVICE", "HETCCL_GROUP_MAP", "HETCCL_TRANSPORT", "HETCCL_GPU_BORDER_MIN"})
      unsetenv(v);
  }
  template <typename F>
  F fn(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  void* lib_ = nullptr;
};

// A buffer in the rank's emulated device memory.
template <typename T>
struct Dev {
  explicit Dev(size_t n) : n(n) { EXPECT_EQ(emuMalloc(reinterpret_cast<void**>(&p), n * sizeof(T) + 1), emuSuccess); }
  ~Dev() { emuFree(p); }
  void put(const std::vector<T>& v) { EXPECT_EQ(emuMemcpy(p, v.data(), n * sizeof(T), 1), emuSuccess); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    EXPECT_EQ(emuMemcpy(v.data(), p, n * sizeof(T), 2), emuSuccess);
    return v;
  }
  T* p = nullptr;
  size_t n;
};

TEST_P(DropInEmu, EveryCallOnDeviceBuffersInStreamOrder) {
  auto getId = fn<int (*)(Id*)>("ncclGetUniqueId");
  auto init = fn<int (*)(Comm*, int, Id, int)>("ncclCommInitRank");
  auto allReduce = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclAllReduce");
  auto bcast = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclBroadcast");
  auto reduce = fn<int (*)(const void*, void*, size_t, int, int, int, Comm, void*)>("ncclReduce");
  auto allGather = fn<int (*)(const void*, void*, size_t, int, Comm, void*)>("ncclAllGather");
  auto reduceScatter = fn<int (*)(const void*, void*, size_t, int, int, Comm, void*)>("ncclReduceScatter");
  auto alltoall = fn<int (*)(const void*, void*, size_t, int, Comm, void*)>("ncclAlltoAll");
  auto send = fn<int (*)(const void*, size_t, int, int, Comm, void*)>("ncclSend");
  auto recv = fn<int (*)(void*, size_t, int, int, Comm, void*)>("ncclRecv");
  auto groupStart = fn<int (*)()>("ncclGroupStart");
  auto groupEnd = fn<int (*)()>("ncclGroupEnd");
  auto premul = fn<int (*)(int*, void*, int, int, Comm)>("ncclRedOpCreatePreMulSum");
  auto opDestroy = fn<int (*)(int, Comm)>("ncclRedOpDestroy");
  auto asyncError = fn<int (*)(Comm, int*)>("ncclCommGetAsyncError");
  auto lastError = fn<const char* (*)(Comm)>("ncclGetLastError");
  auto destroy = fn<int (*)(Comm)>("ncclCommDestroy");
  Id id;
  ASSERT_EQ(getId(&id), 0);
  const int n = 4;
  const size_t N = (size_t{1} << 18) + 5;  // over the small-message plan, odd
  std::vector<std::string> errs(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      auto err = [&](const std::string& what, Comm c) { errs[r] += what + ": " + lastError(c) + "; "; };
      auto check = [&](bool ok, const std::string& what) {
        if (!ok) errs[r] += what + " wrong; ";
      };
      if (emuSetDevice(r) != emuSuccess) return err("set device", nullptr);
      emuStream_t s = nullptr;
      if (emuStreamCreateWithFlags(&s, 0) != emuSuccess) return err("stream", nullptr);
      Comm c = nullptr;
      if (init(&c, n, id, r) != 0) return err("init", nullptr);
      {
        Dev<float> in(N), out(N);
        std::vector<float> h(N);
        for (size_t i = 0; i < N; ++i) h[i] = static_cast<float>((r + 1) * (i % 97));
        in.put(h);
        // Back to back on the stream, nothing synchronised in between:
        // each call must see the one before it done.
        if (allReduce(in.p, out.p, N, kFloat32, kSum, c, s) != 0) err("allreduce", c);
        if (allReduce(out.p, out.p, N, kFloat32, kMax, c, s) != 0) err("allreduce in place", c);
        Dev<int32_t> b(1000), g(4 * n), rs(3 * n), rsOut(3), a2a(n), a2aOut(n), tok(1), got(1), red(8);
        b.put(std::vector<int32_t>(1000, r == 2 ? 42 : -1));
        if (bcast(b.p, b.p, 1000, kInt32, 2, c, s) != 0) err("broadcast", c);
        Dev<int32_t> mine(4);
        mine.put(std::vector<int32_t>(4, r));
        if (allGather(mine.p, g.p, 4, kInt32, c, s) != 0) err("allgather", c);
        rs.put(std::vector<int32_t>(3 * n, r + 1));
        if (reduceScatter(rs.p, rsOut.p, 3, kInt32, kSum, c, s) != 0) err("reducescatter", c);
        std::vector<int32_t> a(n);
        for (int p = 0; p < n; ++p) a[p] = r * 10 + p;
        a2a.put(a);
        if (alltoall(a2a.p, a2aOut.p, 1, kInt32, c, s) != 0) err("alltoall", c);
        red.put(std::vector<int32_t>(8, r * 3));
        if (reduce(red.p, red.p, 8, kInt32, kMax, 1, c, s) != 0) err("reduce", c);
        tok.put({r});
        groupStart();
        send(tok.p, 1, kInt32, (r + 1) % n, c, s);
        recv(got.p, 1, kInt32, (r + n - 1) % n, c, s);
        if (groupEnd() != 0) err("send/recv group", c);
        // PreMulSum, scalar in device memory: read when the call runs.
        Dev<float> factor(1), ones(8), scaled(8);
        factor.put({100.0f});
        int op = -1;
        if (premul(&op, factor.p, kFloat32, 0 /*ncclScalarDevice*/, c) != 0) err("premulsum", c);
        factor.put({2.0f});
        ones.put(std::vector<float>(8, 1.0f));
        if (allReduce(ones.p, scaled.p, 8, kFloat32, op, c, s) != 0) err("premulsum allreduce", c);
        if (emuStreamSynchronize(s) != emuSuccess) err("stream synchronize", c);
        int e = -1;
        if (asyncError(c, &e) != 0 || e != 0) err("async error " + std::to_string(e), c);
        if (op >= 0 && opDestroy(op, c) != 0) err("op destroy", c);

        std::vector<float> o = out.get();
        bool ok = true;
        for (size_t i = 0; i < N && ok; ++i) ok = o[i] == 10.0f * static_cast<float>(i % 97);
        check(ok, "allreduce value");
        for (int32_t v : b.get()) ok = ok && v == 42;
        check(ok, "broadcast value");
        std::vector<int32_t> gv = g.get();
        for (int p = 0; p < n; ++p) check(gv[4 * p + 3] == p, "allgather block " + std::to_string(p));
        for (int32_t v : rsOut.get()) check(v == n * (n + 1) / 2, "reducescatter value");
        std::vector<int32_t> av = a2aOut.get();
        for (int p = 0; p < n; ++p) check(av[p] == p * 10 + r, "alltoall from " + std::to_string(p));
        if (r == 1) check(red.get()[7] == 3 * (n - 1), "reduce value");
        check(got.get()[0] == (r + n - 1) % n, "send/recv value");
        std::vector<float> sv = scaled.get();
        check(sv[7] == 2.0f * n, "premulsum value " + std::to_string(sv[7]) + " (the scalar read early?)");
        // Host memory after the device buffers above were seen (one group
        // remembers those, DeviceRuntime::bufferKind): still refused by name,
        // on every rank alike, and the communicator stays usable.
        std::vector<float> host(8, 1.0f);
        const int refused = allReduce(host.data(), host.data(), 8, kFloat32, kSum, c, s);
        const std::string why = lastError(c);
        check(refused == 4 /*ncclInvalidArgument*/ && why.find("host memory") != std::string::npos,
              "a host buffer (" + std::to_string(refused) + ": " + why + ")");
        if (allReduce(in.p, out.p, N, kFloat32, kSum, c, s) != 0) err("allreduce after the refused call", c);
        if (emuStreamSynchronize(s) != emuSuccess) err("stream synchronize", c);
      }
      if (destroy(c) != 0) err("destroy", c);
      emuStreamDestroy(s);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[r], "") << "rank " << r;
  if (!GetParam().groupMap) {
    void* vendor = dlopen(HETCCL_TEST_EMU_NCCL, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(vendor, nullptr) << "the vendor library was never loaded";
    auto selfCalls = reinterpret_cast<long (*)()>(dlsym(vendor, "hetcclEmuNcclSelfCalls"));
    ASSERT_NE(selfCalls, nullptr);
    EXPECT_GE(selfCalls(), 4 * 8) << "the vendor library's calls to its own API did not reach it";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DropInEmu,
                         ::testing::Values(Layout{"one_group", nullptr, "shm", nullptr},
                                           Layout{"two_groups_border", "0-1:a,2-3:b", "shm", nullptr},
                                           Layout{"two_groups_staged", "0-1:a,2-3:b", "shm", "1M"},
                                           Layout{"interleaved_staged", "0:a,1:b,2:a,3:b", "tcp", "1M"},
                                           Layout{"three_groups_staged", "0:a,1:b,2-3:c", "tcp", "1M"}),
                         [](const ::testing::TestParamInfo<Layout>& i) { return std::string(i.param.name); });

}  // namespace
