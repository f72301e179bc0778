// Registry of group backends.
#include "backend/backend.h"

#include "backend/host/host_backend.h"
#include "backend/nccl/nccl_backend.h"
#include "core/error.h"

namespace hetccl {

std::unique_ptr<Backend> createBackend(const std::string& name, const BackendContext& ctx) {
  if (name == "host") return std::make_unique<HostBackend>(ctx);
  // NCCL-ABI libraries, loaded at run time: a missing library is an error here.
  if (name == "nccl" || name == "rccl") return std::make_unique<NcclBackend>(ctx, name);
  if (name == "emu-nccl") return std::make_unique<NcclBackend>(ctx, "emu");
  throwError(hetcclInvalidArgument,
             "group backend '" + name + "' is not available in this build (known: host, nccl, rccl, emu-nccl)");
}

std::vector<std::string> backendNames() { return {"host", "nccl", "rccl", "emu-nccl"}; }

std::string defaultBackendFor(const std::string& deviceKind) {
  if (deviceKind == "cuda") return "nccl";
  if (deviceKind == "hip") return "rccl";
  if (deviceKind == "emu") return "emu-nccl";
  return "host";
}

}  // namespace hetccl
