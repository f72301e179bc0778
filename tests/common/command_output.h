// A shell command's standard output, for tests that read what a tool or a
// job wrote (dumps, the doctor's report).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace hetccl_test {

// Runs cmd through the shell and returns what it printed; *status (when
// given) gets its exit status, -1 where it did not run or did not exit.
inline std::string commandOutput(const std::string& cmd, int* status = nullptr) {
  std::string text;
  if (status) *status = -1;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int st = pclose(p);
  if (status) *status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return text;
}

}  // namespace hetccl_test
