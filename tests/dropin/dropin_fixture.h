// What the drop-in's tests share: the drop-in loaded by path with dlopen,
// as a program built for NCCL would load it, and NCCL's id and handle types.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace dropin_test {

struct Id {
  char b[128];
};
using Comm = void*;

class DropIn : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(HETCCL_TEST_DROPIN_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
  }
  template <typename F>
  F fn(const char* name) {
    void* p = dlsym(lib_, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
  void* lib_ = nullptr;
};

}  // namespace dropin_test
