// Group layouts the multi-process tests run on (group name of each rank) and
// the communicator facts each implies.
#pragma once

#include <string>
#include <vector>

#include "harness.h"

namespace hmp {

// 1 group of 4; 2+2; 3+1; 1+1+2; interleaved 2+2; 8 ranks in 3 groups.
inline const std::vector<std::string>& allLayouts() {
  static const std::vector<std::string> v = {"a,a,a,a", "a,a,b,b", "a,a,a,b", "a,b,c,c", "a,b,a,b", "a,a,a,b,b,c,c,c"};
  return v;
}

inline const std::vector<std::string>& allTransports() {
  static const std::vector<std::string> v = {"shm", "tcp"};
  return v;
}

// EXPECTs that hetcclCommGetInfo on r.comm reports r's layout and transport.
void expectInfoMatchesLayout(const Rank& r);

}  // namespace hmp
