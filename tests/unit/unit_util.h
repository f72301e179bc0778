// Helpers shared by the unit tests: scoped environment changes, expected
// hetccl::Error checks, and ranks run as threads of this process.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/root.h"
#include "bootstrap/unique_id.h"
#include "core/error.h"

namespace hetccl::test {

// Sets (value) or unsets (nullptr) an environment variable for the scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Runs f and returns the hetccl::Error it threw (nullopt if none).
template <class F>
std::optional<Error> catchError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

inline bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Expects `stmt` to throw hetccl::Error with `code` and a message containing `substr`.
#define EXPECT_HETCCL_ERROR(stmt, expectCode, substr)                       \
  do {                                                                      \
    auto err_ = ::hetccl::test::catchError([&] { stmt; });                  \
    if (!err_) {                                                            \
      ADD_FAILURE() << "no hetccl::Error from: " #stmt;                     \
    } else {                                                                \
      EXPECT_EQ(err_->code(), (expectCode)) << err_->what();                \
      EXPECT_TRUE(::hetccl::test::contains(err_->what(), (substr)))         \
          << "message '" << err_->what() << "' lacks '" << (substr) << "'"; \
    }                                                                       \
  } while (0)

// A fresh job whose rendezvous root listens on loopback.
inline IdContents newJob(double timeoutS = 30) {
  SockAddr lo = SockAddr::parse("127.0.0.1:0");
  return startRootServer(lo, newIdContents(lo), timeoutS);
}

// Runs fn(rank) for every rank on its own thread; returns what each threw
// ("" where nothing).
inline std::vector<std::string> runRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::string> errs(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errs[r] = std::string("rank ") + std::to_string(r) + ": " + e.what();
      } catch (...) {
        errs[r] = "rank " + std::to_string(r) + ": unknown exception";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errs;
}

inline void expectAllOk(const std::vector<std::string>& errs) {
  for (const auto& e : errs) EXPECT_EQ(e, "");
}

}  // namespace hetccl::test
