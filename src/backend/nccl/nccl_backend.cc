// NcclBackend: hetccl's group calls mapped one to one onto an NCCL-ABI
// library's (see nccl_backend.h).
#include "backend/nccl/nccl_backend.h"

#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "elements/lowp.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl {

using namespace nccl;  // NOLINT: the NCCL ABI names read best unqualified here

static_assert(kUniqueIdBytes == kBackendIdBytes, "an ncclUniqueId is the backend id blob");

hetcclResult_t ncclToHetccl(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return hetcclSuccess;
    case ncclUnhandledCudaError: return hetcclUnhandledDeviceError;
    case ncclSystemError: return hetcclSystemError;
    case ncclInternalError: return hetcclInternalError;
    case ncclInvalidArgument: return hetcclInvalidArgument;
    case ncclInvalidUsage: return hetcclInvalidUsage;
    case ncclRemoteError: return hetcclRemoteError;
    case ncclInProgress: return hetcclInProgress;
  }
  return hetcclInternalError;  // a code this build does not know
}

NcclBackend::NcclBackend(const BackendContext& ctx, const std::string& flavor)
    : NcclBackend(ctx, loadNcclApi(flavor)) {}

NcclBackend::NcclBackend(const BackendContext& ctx, const NcclApi& api) : Backend(ctx), api_(api) {}

NcclBackend::~NcclBackend() {
  ncclComm_t c = comm_.load();
  if (!c || aborted_.load()) return;
  try {
    ncclResult_t r = api_.commDestroy(c);
    if (r != ncclSuccess) LOG_WARN(kBackend, "%s", failureText(r, "ncclCommDestroy").c_str());
  } catch (...) {  // never throw from a destructor
  }
}

std::string NcclBackend::failureText(ncclResult_t r, const char* fn) const {
  const char* text = api_.getErrorString ? api_.getErrorString(r) : nullptr;
  std::string msg = std::string(name()) + " backend (group rank " + std::to_string(rank()) + " of " +
                    std::to_string(nranks()) + "): " + fn + " failed: " + (text ? text : "unknown error") + " (" +
                    ncclLibName(api_.flavor) + " code " + std::to_string(static_cast<int>(r)) + ")";
  if (api_.getLastError) {
    // Null before connect and after abort: the library's last error of any comm.
    const char* last = api_.getLastError(aborted_.load() ? nullptr : comm_.load());
    if (last && *last) msg += "; last error: " + std::string(last);
  }
  return msg;
}

void NcclBackend::check(ncclResult_t r, const char* fn) const {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throwError(ncclToHetccl(r), failureText(r, fn));
}

ncclComm_t NcclBackend::comm() const {
  if (aborted_.load()) throwError(hetcclInvalidUsage, std::string(name()) + " backend: the communicator was aborted");
  ncclComm_t c = comm_.load();
  if (!c) throwError(hetcclInternalError, std::string(name()) + " backend: used before connect");
  return c;
}

ncclDataType_t NcclBackend::ncclType(DataType dt) const {
  if (!dataTypeValid(dt))
    throwError(hetcclInvalidArgument,
               std::string(name()) + " backend: data type " + std::to_string(static_cast<int>(dt)) + " is not valid");
  if ((dt == hetcclFloat8e4m3 || dt == hetcclFloat8e5m2) && api_.version < kFp8Version)
    throwError(hetcclInvalidArgument, std::string(dataTypeName(dt)) + " needs " + ncclLibName(api_.flavor) + " " +
                                          ncclVersionString(kFp8Version) + " or newer; the " + name() +
                                          " backend loaded version " + ncclVersionString(api_.version) + " (" +
                                          api_.path + ")");
  return static_cast<ncclDataType_t>(dt);  // same numbers
}

template <class Enqueue>
void NcclBackend::withOp(const ReduceOp& op, DataType dt, ncclComm_t c, Enqueue&& enqueue) {
  if (op.preMul && op.postDiv)
    throwError(hetcclInternalError, std::string(name()) + " backend: an op with both PreMulSum and a division");
  if ((op.preMul || op.postDiv) && op.kind != RedKind::kSum)
    throwError(hetcclInternalError, std::string(name()) + " backend: PreMulSum/Avg combined with " +
                                        redKindName(op.kind) + " instead of sum");
  if (op.postDiv) {  // integer Avg: NCCL's sum then truncating division by nranks
    if (op.divisor != nranks())
      throwError(hetcclInternalError, std::string(name()) + " backend: division by " + std::to_string(op.divisor) +
                                          " asked of a group of " + std::to_string(nranks()) + " ranks");
    enqueue(ncclAvg);
    return;
  }
  if (!op.preMul) {
    enqueue(static_cast<ncclRedOp_t>(op.kind));  // same numbers
    return;
  }
  // Float Avg over exactly this group is NCCL's own (it scales by 1/nranks
  // just the same): no op to create.
  if (op.userOp == hetcclAvg && op.scalar == 1.0 / nranks()) {
    enqueue(ncclAvg);
    return;
  }
  if (op.scalarAt) {
    // The caller's scalar in device memory: the library reads it when the
    // collective runs (ncclScalarDevice), as it would without hetccl.
    ncclRedOp_t dop = ncclSum;
    check(api_.redOpCreatePreMulSum(&dop, const_cast<void*>(op.scalarAt), static_cast<ncclDataType_t>(dt),
                                    ncclScalarDevice, c),
          "ncclRedOpCreatePreMulSum");
    try {
      enqueue(dop);
    } catch (...) {
      api_.redOpDestroy(dop, c);
      throw;
    }
    check(api_.redOpDestroy(dop, c), "ncclRedOpDestroy");
    return;
  }
  // The scalar in the element type's own representation, read at once
  // (ncclScalarHostImmediate).
  union {
    uint16_t u16;
    float f32;
    double f64;
  } scalar{};
  switch (dt) {
    case hetcclFloat16: scalar.u16 = floatToHalf(static_cast<float>(op.scalar)); break;
    case hetcclBfloat16: scalar.u16 = floatToBf16(static_cast<float>(op.scalar)); break;
    case hetcclFloat32: scalar.f32 = static_cast<float>(op.scalar); break;
    case hetcclFloat64: scalar.f64 = op.scalar; break;
    default:
      throwError(hetcclInvalidArgument, std::string(name()) + " backend: PreMulSum is not supported for " +
                                            dataTypeName(dt) + " (float16, bfloat16, float32, float64 only)");
  }
  ncclRedOp_t nop = ncclSum;
  check(api_.redOpCreatePreMulSum(&nop, &scalar, static_cast<ncclDataType_t>(dt), ncclScalarHostImmediate, c),
        "ncclRedOpCreatePreMulSum");
  // NCCL allows destroying the op as soon as the call that uses it returned.
  try {
    enqueue(nop);
  } catch (...) {
    api_.redOpDestroy(nop, c);
    throw;
  }
  check(api_.redOpDestroy(nop, c), "ncclRedOpDestroy");
}

void NcclBackend::makeId(void* out) {
  ncclUniqueId id{};
  check(api_.getUniqueId(&id), "ncclGetUniqueId");
  memcpy(out, id.internal, kUniqueIdBytes);
}

// The config the vendor's init gets: the caller's own ncclConfig_t where the
// drop-in passed one, else a 2.17 head; `blocking` is the communicator's.
std::vector<uint8_t> NcclBackend::initConfig() const {
  std::vector<uint8_t> cfg = ctx_.vendorConfig;
  if (cfg.size() < sizeof(ncclConfigHead)) {
    ncclConfigHead h{sizeof(ncclConfigHead), kConfigMagic, 21700, 1, INT_MIN, INT_MIN, INT_MIN, nullptr, INT_MIN};
    cfg.assign(reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + sizeof(h));
  }
  int blocking = ctx_.blocking ? 1 : 0;
  memcpy(cfg.data() + kConfigBlockingOffset, &blocking, sizeof(blocking));
  return cfg;
}

void NcclBackend::connect(const void* leaderId) {
  if (comm_.load()) throwError(hetcclInternalError, std::string(name()) + " backend: connect called twice");
  if (aborted_.load()) throwError(hetcclInvalidUsage, std::string(name()) + " backend: aborted before connect");
  ncclUniqueId id;
  memcpy(id.internal, leaderId, kUniqueIdBytes);
  ncclComm_t c = nullptr;
  // A blocking init cannot be interrupted; a non-blocking communicator's is
  // non-blocking in the library too, so that abort() can end it.
  const bool withConfig = api_.commInitRankConfig && (!ctx_.blocking || !ctx_.vendorConfig.empty());
  std::vector<uint8_t> cfg = withConfig ? initConfig() : std::vector<uint8_t>{};
  ncclResult_t r = withConfig ? api_.commInitRankConfig(&c, nranks(), id, rank(), cfg.data())
                              : api_.commInitRank(&c, nranks(), id, rank());
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string msg = failureText(r, "ncclCommInitRank");
    if (c) api_.commAbort(c);  // a communicator left in an error state
    throwError(ncclToHetccl(r), msg);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load()) {  // abort() came during init and found no communicator to abort
      if (c) api_.commAbort(c);
      throwError(hetcclInvalidUsage, std::string(name()) + " backend: aborted during connect");
    }
    comm_.store(c);
  }
  if (r == ncclInProgress) waitInit();
  LOG_INFO(kBackend, "%s: group rank %d of %d connected (%s %s)", name(), rank(), nranks(),
           ncclLibName(api_.flavor).c_str(), ncclVersionString(api_.version).c_str());
}

// Polls a non-blocking init to its end, bounded by the timeout; abort()
// (which aborts the communicator under mu_) ends it at once.
void NcclBackend::waitInit() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(ctx_.timeoutS);
  for (;;) {
    ncclResult_t state = ncclInProgress, r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_.load()) throwError(hetcclInvalidUsage, std::string(name()) + " backend: aborted during init");
      r = api_.commGetAsyncError(comm_.load(), &state);
    }
    if (r != ncclSuccess) check(r, "ncclCommGetAsyncError (init)");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) check(state, "ncclCommInitRankConfig (non-blocking)");
    if (std::chrono::steady_clock::now() > deadline)
      throwError(hetcclRemoteError, std::string(name()) + " backend: the library's init did not finish within " +
                                        std::to_string(static_cast<int>(ctx_.timeoutS)) + " s (HETCCL_TIMEOUT_S)");
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

void NcclBackend::abort() {
  // Under mu_: connect's polling and asyncError() never see a freed communicator.
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.exchange(true)) return;
  ncclComm_t c = comm_.load();
  if (!c) return;
  ncclResult_t r = api_.commAbort(c);
  if (r != ncclSuccess) LOG_WARN(kBackend, "%s", failureText(r, "ncclCommAbort").c_str());
}

hetcclResult_t NcclBackend::asyncError() {
  // Under mu_: abort() cannot free the communicator while it is asked.
  std::lock_guard<std::mutex> lock(mu_);
  ncclComm_t c = comm_.load();
  if (!c || aborted_.load()) return hetcclSuccess;
  ncclResult_t e = ncclSuccess;
  ncclResult_t r = api_.commGetAsyncError(c, &e);
  if (r != ncclSuccess) return r == ncclInProgress ? hetcclSuccess : ncclToHetccl(r);
  if (e != ncclSuccess && e != ncclInProgress) {
    asyncText_ = failureText(e, "enqueued work (ncclCommGetAsyncError)");
    LOG_WARN(kBackend, "%s", asyncText_.c_str());
  }
  return ncclToHetccl(e);
}

std::string NcclBackend::asyncErrorText() {
  std::lock_guard<std::mutex> g(mu_);
  return asyncText_;
}

void NcclBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) {
  ncclComm_t c = comm();
  ncclDataType_t t = ncclType(dt);
  withOp(op, dt, c, [&](ncclRedOp_t o) { check(api_.allReduce(send, recv, count, t, o, c, s), "ncclAllReduce"); });
}

void NcclBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                                Stream s) {
  ncclComm_t c = comm();
  ncclDataType_t t = ncclType(dt);
  withOp(op, dt, c,
         [&](ncclRedOp_t o) { check(api_.reduceScatter(send, recv, recvcount, t, o, c, s), "ncclReduceScatter"); });
}

void NcclBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) {
  ncclComm_t c = comm();
  check(api_.allGather(send, recv, sendcount, ncclType(dt), c, s), "ncclAllGather");
}

void NcclBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) {
  ncclComm_t c = comm();
  check(api_.broadcast(send, recv, count, ncclType(dt), root, c, s), "ncclBroadcast");
}

void NcclBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                         Stream s) {
  ncclComm_t c = comm();
  ncclDataType_t t = ncclType(dt);
  withOp(op, dt, c, [&](ncclRedOp_t o) { check(api_.reduce(send, recv, count, t, o, root, c, s), "ncclReduce"); });
}

void NcclBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream s) {
  ncclComm_t c = comm();
  check(api_.send(buf, count, ncclType(dt), peer, c, s), "ncclSend");
}

void NcclBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream s) {
  ncclComm_t c = comm();
  check(api_.recv(buf, count, ncclType(dt), peer, c, s), "ncclRecv");
}

// NCCL counts nesting itself (per thread); every call goes through, and the
// count here catches an unmatched groupEnd.
void NcclBackend::groupStart() {
  check(api_.groupStart(), "ncclGroupStart");
  ++groupDepth_;
}

void NcclBackend::groupEnd() {
  if (groupDepth_ == 0) throwError(hetcclInvalidUsage, std::string(name()) + " backend: groupEnd without groupStart");
  --groupDepth_;
  check(api_.groupEnd(), "ncclGroupEnd");
}

}  // namespace hetccl
