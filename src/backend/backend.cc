// Registry of group backends.
#include "backend/backend.h"

#include "backend/host/host_backend.h"
#include "core/error.h"

namespace hetccl {

std::unique_ptr<Backend> createBackend(const std::string& name, const BackendContext& ctx) {
  if (name == "host") return std::make_unique<HostBackend>(ctx);
  throwError(hetcclInvalidArgument, "group backend '" + name + "' is not available in this build (known: host)");
}

std::string defaultBackendFor(const std::string& deviceKind) {
  if (deviceKind == "cuda") return "nccl";
  if (deviceKind == "hip") return "rccl";
  return "host";
}

}  // namespace hetccl
