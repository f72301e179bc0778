// device/: the host runtime and the device-kind registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "device/device.h"
#include "unit_util.h"

namespace hetccl {
namespace {

TEST(HostRuntime, KindAndSynchrony) {
  auto d = createDeviceRuntime("host");
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->kind(), "host");
  EXPECT_TRUE(d->synchronous());
}

TEST(HostRuntime, AllocIsAlignedWritableAndHost) {
  auto d = createDeviceRuntime("host");
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{3} << 20}) {
    void* p = d->alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes) memset(p, 0xab, bytes);
    EXPECT_EQ(d->pointerKind(p), MemKind::kHost);
    d->free(p);
  }
  int onStack = 0;
  EXPECT_EQ(d->pointerKind(&onStack), MemKind::kHost);
  d->free(nullptr);
}

TEST(HostRuntime, CopyIsImmediateAndHandlesOverlap) {
  auto d = createDeviceRuntime("host");
  std::vector<uint8_t> a(100), b(100, 0);
  for (int i = 0; i < 100; ++i) a[i] = static_cast<uint8_t>(i);
  d->copy(b.data(), a.data(), 100, nullptr);
  EXPECT_EQ(a, b);
  d->copy(a.data() + 10, a.data(), 50, nullptr);  // overlapping, forward
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a[10 + i], i);
  d->copy(b.data(), b.data() + 20, 50, nullptr);  // overlapping, backward
  for (int i = 0; i < 50; ++i) ASSERT_EQ(b[i], 20 + i);
  d->copy(b.data(), b.data(), 100, nullptr);  // self
  d->copy(nullptr, nullptr, 0, nullptr);      // nothing
  EXPECT_EQ(b[0], 20);
}

TEST(DeviceRegistry, UnknownKindNamesTheKnownKinds) {
  std::vector<std::string> kinds = deviceKinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "host"), kinds.end());
  for (const char* bad : {"cuda", "hip", "", "HOST"}) {
    SCOPED_TRACE(bad);
    auto err = test::catchError([&] { createDeviceRuntime(bad); });
    if (std::find(kinds.begin(), kinds.end(), bad) != kinds.end()) continue;  // available in this build
    ASSERT_TRUE(err.has_value());
    EXPECT_EQ(err->code(), hetcclInvalidArgument);
    EXPECT_TRUE(test::contains(err->what(), std::string("'") + bad + "'")) << err->what();
    for (const auto& k : kinds) EXPECT_TRUE(test::contains(err->what(), k)) << err->what();
  }
}

TEST(DeviceRegistry, MemKindNames) {
  EXPECT_STREQ(memKindName(MemKind::kHost), "host memory");
  EXPECT_STREQ(memKindName(MemKind::kPinnedHost), "pinned host memory");
  EXPECT_STREQ(memKindName(MemKind::kDevice), "device memory");
  EXPECT_STREQ(memKindName(MemKind::kOtherDevice), "another device's memory");
  EXPECT_STREQ(memKindName(MemKind::kUnknown), "unknown memory");
}

}  // namespace
}  // namespace hetccl
