// Makes a loaded vendor library (NCCL, RCCL) call its own API.
//
// NCCL exports its API with default visibility and calls some of it through
// its own PLT (ncclEnqueueCheck calls ncclCommGetAsyncError; ncclBcast calls
// ncclBroadcast; others call ncclGetVersion, ncclMemAlloc/Free,
// ncclCommRegister, ncclGetUniqueId...). When hetccl's drop-in libnccl.so.2
// is preloaded, the loader binds those references to the drop-in, which
// knows nothing of the vendor's communicators, so every vendor call fails.
//
// rebindOwnApi() rewrites the vendor library's GOT entries for the API names
// it defines itself (nccl*, pnccl*) to its own definitions: the library then
// behaves as it does when nothing is preloaded, as if it had been linked
// with -Bsymbolic for its API. Nothing else changes: its references to
// malloc, the CUDA driver or anything else keep the process's bindings.
//
// Why not RTLD_DEEPBIND: it makes every lookup of the library prefer its own
// dependencies, so it bypasses a preloaded allocator (memory allocated on one
// side and freed on the other), and AddressSanitizer refuses it outright.
// Why not forwarding in the drop-in (hand handles it did not create to the
// vendor): calls without a handle (ncclGetVersion, ncclGetUniqueId,
// ncclGroupStart) cannot be told apart, and every call would pay a lookup.
#pragma once

#include <string>
#include <vector>

namespace hetccl::nccl {

struct RebindResult {
  bool supported = true;             // false: this machine's ELF relocations are not handled
  std::vector<std::string> rebound;  // names whose entries pointed elsewhere and now point home
  int alreadyHome = 0;               // entries that pointed to the library's own definition already
};

// `handle` from dlopen. Only entries of symbols the library itself defines
// and whose names start with one of `prefixes` are touched. Throws
// hetcclSystemError when an entry cannot be made writable.
RebindResult rebindOwnApi(void* handle, const std::vector<std::string>& prefixes);

}  // namespace hetccl::nccl
