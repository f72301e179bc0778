// Communicator set-up, staging and the stream plumbing of hetccl_torch.
// The collectives themselves are in hetccl_colls.cc.
#include "hetccl_backend.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstdlib>
#include <cstring>

#include "hetccl_work.h"

namespace hetccl_torch {

void* nativeStream(const c10::Stream& s) {
#if HETCCL_TORCH2
  return s.native_handle();
#else
  (void)s;
  TORCH_CHECK(false, "hetccl: CUDA tensors need torch 2.x");
#endif
}

namespace {

// The unique id travels through the c10d store, as NCCL's does.
hetcclUniqueId exchangeId(const c10::intrusive_ptr<c10d::Store>& store, int rank, const std::string& key) {
  hetcclUniqueId id;
  if (rank == 0) {
    hetcclResult_t r = hetcclGetUniqueId(&id);
    TORCH_CHECK(r == hetcclSuccess,
                msg("hetccl: hetcclGetUniqueId failed: ", hetcclGetErrorString(r), ": ", hetcclGetLastError(nullptr)));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof(id), msg("hetccl: the unique id in the store has ", v.size(), " bytes, expected ",
                                            sizeof(id), " (is every rank running the same hetccl?)"));
    std::memcpy(&id, v.data(), sizeof(id));
  }
  return id;
}

}  // namespace

HetcclBackend::HetcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout, const std::string& device, const std::string& group)
    : BackendBase(rank, size), timeout_(timeout) {
  TORCH_CHECK(device == "cuda" || device == "host", msg("hetccl: device '", device, "' is not one of cuda, host"));
  if (device == "cuda") {
    TORCH_CHECK(HETCCL_TORCH2, msg("hetccl: GPU ranks need torch 2.x (this is ", TORCH_VERSION_MAJOR, ".",
                                   TORCH_VERSION_MINOR, "); use device 'host'"));
    c10::impl::VirtualGuardImpl impl(at::kCUDA);
    TORCH_CHECK(impl.deviceCount() > 0, "hetccl: device 'cuda' asked for, but torch sees no CUDA device");
    gpu_ = impl.getDevice();
    stream_ = impl.getStreamFromGlobalPool(*gpu_, /*isHighPriority=*/true);
  }
  // Each process group of a job needs its own id. torch hands each group a
  // store of its own (prefixed by the group's name); backends made on one
  // store take turns: every member adds 1 to a counter in the store, and the
  // turn is the count before it over the group's size, the same on every
  // member, since no member makes its next backend on the store before this
  // one's init, which all of them join, is done. (A per-process count went
  // out of step where a process was left out of a group: new_group(ranks)
  // makes no backend on the others.)
  const uint64_t n = static_cast<uint64_t>(store->add("hetccl_backends", 1) - 1) / static_cast<uint64_t>(size);
  hetcclUniqueId id = exchangeId(store, rank, "hetccl_id_" + std::to_string(n));
  store_ = store;
  storePrefix_ = "hetccl_" + std::to_string(n) + "_";
  hetcclConfig_t cfg = HETCCL_CONFIG_INITIALIZER;
  long secs = static_cast<long>((timeout.count() + 999) / 1000);
  if (secs > 0) cfg.timeoutSeconds = static_cast<int>(std::min<long>(secs, 1 << 30));
  cfg.device = device.c_str();
  if (!group.empty()) cfg.groupName = group.c_str();
  c10::OptionalDeviceGuard guard(gpu_);
  hetcclComm_t comm = nullptr;
  hetcclResult_t r = hetcclCommInitRankConfig(&comm, size, id, rank, &cfg);
  TORCH_CHECK(r == hetcclSuccess, msg("hetccl: creating the communicator of rank ", rank, " of ", size,
                                      " failed: ", hetcclGetErrorString(r), ": ", hetcclGetLastError(nullptr)));
  comm_ = std::make_shared<CommHandle>(comm);
}

HetcclBackend::~HetcclBackend() = default;

void HetcclBackend::check(hetcclResult_t r, const char* what) const {
  if (r == hetcclSuccess || r == hetcclInProgress) return;
  TORCH_CHECK(false, msg("hetccl ", what, ": ", hetcclGetErrorString(r), ": ", hetcclGetLastError(comm())));
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::launch(c10d::OpType op, const char* name, std::vector<at::Tensor*> inputs,
                                                     std::vector<at::Tensor*> outputs, const Issue& issue,
                                                     bool hostWait) {
  ++seq_;
  const at::Device dev = rankDevice();
  // Tensors on the other kind of memory are staged: copied to this rank's
  // kind, and outputs copied back once the operation completes.
  std::vector<std::pair<at::Tensor, at::Tensor*>> copyBack;  // (user's tensor, staged slot)
  auto stage = [&](at::Tensor* t, bool out) {
    if (!t->defined()) return;
    if (gpu_ ? (t->is_cuda() && t->device() == *gpu_) : t->is_cpu()) return;
    TORCH_CHECK(!(gpu_ && t->is_cuda()),
                msg("hetccl ", name, ": a tensor on ", t->device(), " but this rank's device is ", *gpu_,
                    " (call torch.cuda.set_device before init_process_group)"));
    TORCH_CHECK(t->is_cpu() || t->is_cuda(), msg("hetccl ", name, ": tensors on ", t->device(), " are not supported"));
    at::Tensor user = *t;
    *t = user.to(dev, /*non_blocking=*/false, /*copy=*/true);
    if (out) copyBack.emplace_back(user, t);
  };
  for (at::Tensor* t : inputs) stage(t, false);
  for (at::Tensor* t : outputs) stage(t, true);
  std::vector<at::Tensor> results;
  for (at::Tensor* t : outputs)
    if (t->defined()) results.push_back(*t);
  std::vector<at::Tensor*> touched = inputs;  // what the side stream uses (GPU rank)
  touched.insert(touched.end(), outputs.begin(), outputs.end());
  if (coalescing_) return launchCoalesced(op, name, touched, std::move(results), copyBack, issue);

  if (!gpu_) {  // host rank: complete on return
    issue(nullptr);
    for (auto& [user, slot] : copyBack) user.copy_(*slot);
    if (!copyBack.empty()) {
      results.clear();
      for (auto& cb : copyBack) results.push_back(cb.first);
    }
    return c10::make_intrusive<HetcclWork>(rank_, op, name, results, comm_, nullptr, c10::nullopt, false, timeout_);
  }

  c10::DeviceGuard deviceGuard(dev);
  issueOnSideStream(touched, issue);
  auto done = std::make_shared<c10::Event>(at::kCUDA);
  done->record(*stream_);
  if (!copyBack.empty()) {  // host tensors on a GPU rank: finish here, then copy back
    hostWaitEvent(*done, comm(), timeout_, name);
    results.clear();
    for (auto& [user, slot] : copyBack) {
      user.copy_(*slot);
      results.push_back(user);
    }
    return c10::make_intrusive<HetcclWork>(rank_, op, name, results, comm_, nullptr, c10::nullopt, false, timeout_);
  }
  return c10::make_intrusive<HetcclWork>(rank_, op, name, results, comm_, done, stream_, hostWait, timeout_);
}

void HetcclBackend::issueOnSideStream(const std::vector<at::Tensor*>& touched, const Issue& issue) {
  c10::impl::VirtualGuardImpl impl(at::kCUDA);
  c10::Event ready(at::kCUDA);
  ready.record(impl.getStream(*gpu_));  // inputs are produced in the caller's stream order
  ready.block(*stream_);
  issue(nativeStream(*stream_));
  // The caching allocator must not hand these blocks out again before the
  // side stream is done with them.
  for (at::Tensor* t : touched)
    if (t->defined() && t->is_cuda() && t->storage().data_ptr().get())
      impl.recordDataPtrOnStream(t->storage().data_ptr(), *stream_);
}

// Runs fn(datatype, op, count) for a reduction over t, with torch's ReduceOp
// mapped to hetccl's (PREMUL_SUM as a temporary hetccl op). The op and the
// tensor's type were checked by reducible() before anything was staged.
void HetcclBackend::reduceTyped(const at::Tensor& t, const c10d::ReduceOp& op,
                                const std::function<void(hetcclDataType_t, hetcclRedOp_t, size_t)>& call) {
  const at::ScalarType st = t.scalar_type();
  const bool isBool = st == at::kBool;
  hetcclRedOp_t h = hetcclSum;
  bool temporary = false;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: h = isBool ? hetcclMax : hetcclSum; break;       // logical or
    case c10d::ReduceOp::PRODUCT: h = isBool ? hetcclMin : hetcclProd; break;  // logical and
    case c10d::ReduceOp::MIN: h = hetcclMin; break;
    case c10d::ReduceOp::MAX: h = hetcclMax; break;
    case c10d::ReduceOp::AVG: h = hetcclAvg; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(sup, "hetccl: PREMUL_SUM without its factor");
      double f = sup->double_factor;
#if HETCCL_TORCH2
      if (sup->tensor_factor.defined()) f = sup->tensor_factor.to(at::kCPU).to(at::kDouble).item<double>();
#else
      if (!sup->tensor_factors.empty()) f = sup->tensor_factors[0].to(at::kCPU).to(at::kDouble).item<double>();
#endif
      at::Tensor s = at::scalar_tensor(f, at::TensorOptions().dtype(st));
      check(hetcclRedOpCreatePreMulSum(&h, s.data_ptr(), dataType(st), hetcclScalarHostImmediate, comm()),
            "premul_sum");
      temporary = true;
      break;
    }
    default: TORCH_CHECK(false, "hetccl: internal error: a reduce op that reducible() lets through is not mapped");
  }
  try {
    call(dataType(st), h, static_cast<size_t>(t.numel()));
  } catch (...) {
    if (temporary) hetcclRedOpDestroy(h, comm());
    throw;
  }
  if (temporary) hetcclRedOpDestroy(h, comm());  // hetccl keeps the op's value with the enqueued call
}

bool knownType(at::ScalarType t, hetcclDataType_t* dt) {
  switch (t) {
    case at::kChar: *dt = hetcclInt8; return true;
    case at::kByte:
    case at::kBool: *dt = hetcclUint8; return true;
    case at::kInt: *dt = hetcclInt32; return true;
    case at::kLong: *dt = hetcclInt64; return true;
    case at::kHalf: *dt = hetcclFloat16; return true;
    case at::kFloat: *dt = hetcclFloat32; return true;
    case at::kDouble: *dt = hetcclFloat64; return true;
    case at::kBFloat16: *dt = hetcclBfloat16; return true;
#if HETCCL_TORCH2
    case at::kFloat8_e4m3fn: *dt = hetcclFloat8e4m3; return true;
    case at::kFloat8_e5m2: *dt = hetcclFloat8e5m2; return true;
#endif
    default: return false;
  }
}

hetcclDataType_t dataType(at::ScalarType t) {
  hetcclDataType_t dt{};
  TORCH_CHECK(knownType(t, &dt), msg("hetccl: tensors of type ", t, " cannot be reduced (int8, uint8, bool, int32, ",
                                     "int64, float16, bfloat16, float32, float64 and float8 can)"));
  return dt;
}

c10::intrusive_ptr<BackendBase> createBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout, const std::string& device,
                                              const std::string& group) {
  return c10::make_intrusive<HetcclBackend>(store, rank, size, timeout, device, group);
}

}  // namespace hetccl_torch
