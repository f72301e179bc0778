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

// The ucx transport over UCX's shared-memory and tcp transports (UCX_TLS),
// and over shared memory with its RMA path (HETCCL_UCX_RMA_MIN=1M), where
// this build has it; the layouts it runs on: unequal, interleaved, 3 groups.
inline std::vector<std::string> ucxTransports() {
#if HETCCL_HAVE_UCX
  return {"ucx_sm", "ucx_tcp", "ucx_sm_rma"};
#else
  return {};
#endif
}
// shm, tcp and the ucx variants.
inline std::vector<std::string> transportsWithUcx() {
  std::vector<std::string> v = allTransports();
  for (const std::string& t : ucxTransports()) v.push_back(t);
  return v;
}
inline const std::vector<std::string>& ucxLayouts() {
  static const std::vector<std::string> v = {"a,a,a,b", "a,b,a,b", "a,a,a,b,b,c,c,c"};
  return v;
}

// EXPECTs that hetcclCommGetInfo on r.comm reports r's layout and transport.
void expectInfoMatchesLayout(const Rank& r);

}  // namespace hmp
