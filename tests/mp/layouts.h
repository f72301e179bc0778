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
// The ofi transport over libfabric's tcp provider (RDM through ofi_rxm, on
// the loopback: FI_TCP_IFACE=lo) and its shm provider, where this build has
// it. EFA and Slingshot's cxi cannot be had here.
inline std::vector<std::string> ofiTransports() {
#if HETCCL_HAVE_OFI
  return {"ofi_tcp", "ofi_shm"};
#else
  return {};
#endif
}
// Whether the full matrices run (HETCCL_TEST_FULL=1, make test-full), not their sample.
bool fullTests();
inline const std::vector<std::string>& ucxLayouts() {
  static const std::vector<std::string> v = {"a,a,a,b", "a,b,a,b", "a,a,a,b,b,c,c,c"};
  return v;
}

// EXPECTs that hetcclCommGetInfo on r.comm reports r's layout and transport.
void expectInfoMatchesLayout(const Rank& r);

}  // namespace hmp
