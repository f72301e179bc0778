// Registry of group backends.
#include "backend/backend.h"

#include "backend/host/host_backend.h"
#include "backend/nccl/nccl_backend.h"
#include "core/error.h"

namespace hetccl {
namespace {

bool evenShards(const std::vector<size_t>& b) {
  for (size_t i = 1; i + 1 < b.size(); ++i)
    if (b[i + 1] - b[i] != b[1] - b[0]) return false;
  return true;
}

}  // namespace

void Backend::reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                  const ReduceOp& op, Stream s) {
  const size_t es = dataTypeSize(dt);
  const auto* in = static_cast<const uint8_t*>(send);
  if (evenShards(bounds)) return reduceScatter(send, recv, bounds[1] - bounds[0], dt, op, s);
  groupStart();
  for (int i = 0; i < nranks(); ++i) {
    const size_t n = bounds[i + 1] - bounds[i];
    // A non-root's receive buffer is unused: its own input stands in.
    void* out = i == rank() ? recv : const_cast<uint8_t*>(in + bounds[i] * es);
    if (n > 0) reduce(in + bounds[i] * es, out, n, dt, op, i, s);
  }
  groupEnd();
}

void Backend::allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) {
  const size_t es = dataTypeSize(dt);
  auto* b = static_cast<uint8_t*>(buf);
  if (evenShards(bounds)) {
    const size_t n = bounds[1] - bounds[0];
    return allGather(b + bounds[rank()] * es, b, n, dt, s);
  }
  groupStart();
  for (int i = 0; i < nranks(); ++i) {
    const size_t n = bounds[i + 1] - bounds[i];
    if (n > 0) broadcast(b + bounds[i] * es, b + bounds[i] * es, n, dt, i, s);
  }
  groupEnd();
}

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
