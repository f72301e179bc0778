// hetccl as a torch.distributed backend ("hetccl"): one communicator per
// process group, serving CPU and CUDA tensors alike. A rank is a GPU rank
// (its collectives run in CUDA stream order on a side stream, as the nccl
// backend's do) or a host rank (collectives complete before the call
// returns, as gloo's CPU ones do in effect). Tensors on the other kind of
// memory are staged through a copy on the rank's own kind.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/version.h>
#include "hetccl_msg.h"
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define HETCCL_TORCH2 1
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define HETCCL_TORCH2 0
#endif

#include <hetccl/hetccl.h>

#include "hetccl_work.h"

namespace hetccl_torch {

#if HETCCL_TORCH2
using BackendBase = c10d::Backend;  // torch 2.x: a ProcessGroup holds one backend per device type
#else
using BackendBase = c10d::ProcessGroup;  // torch 1.x: the creator returns the process group itself
#endif

// Issues the hetccl calls of one operation on `stream` (NULL on a host rank).
using Issue = std::function<void(hetcclStream_t stream)>;

struct CommHandle {  // owns the hetccl communicator; Works keep it alive
  explicit CommHandle(hetcclComm_t c) : comm(c) {}
  ~CommHandle();
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  hetcclComm_t comm;
};

class HetcclBackend final : public BackendBase {
 public:
  // device: "cuda" or "host"; group: hetccl group of this rank ("" = by device kind).
  HetcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
                const std::string& device, const std::string& group);
  ~HetcclBackend() override;

  const std::string getBackendName() const override { return "hetccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
#if HETCCL_TORCH2
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // torch.distributed.monitored_barrier: every rank checks in with rank 0
  // through the store; rank 0 names the ranks that did not within the
  // timeout (all of them with waitAllRanks, else the first).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

#if HETCCL_TORCH2
  // A coalescing block (torch's _coalescing_manager, batch_isend_irecv): the
  // operations between the two calls are issued together as one hetccl
  // group when it ends (sends and receives of a ring cannot deadlock).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#if HETCCL_TORCH_SUPPORTS_COALESCING
  bool supportsCoalescing() const override { return true; }
#endif
#endif

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  bool gpuRank() const { return gpu_.has_value(); }
  hetcclComm_t comm() const { return comm_ ? comm_->comm : nullptr; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // Runs `issue` with every tensor of `inputs` and `outputs` on this rank's
  // kind of memory (staging the others: launch replaces the pointed-to
  // handles with the staged copies) and returns the Work of the operation,
  // whose future holds the outputs.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType op, const char* name, std::vector<at::Tensor*> inputs,
                                        std::vector<at::Tensor*> outputs, const Issue& issue, bool hostWait = false);
  // GPU rank: issues on the side stream once the caller's current stream has
  // produced the inputs; `touched` tensors stay allocated until it is done.
  void issueOnSideStream(const std::vector<at::Tensor*>& touched, const Issue& issue);
  at::Device rankDevice() const { return gpu_ ? *gpu_ : at::Device(at::kCPU); }
  void check(hetcclResult_t r, const char* what) const;
  void reduceTyped(const at::Tensor& t, const c10d::ReduceOp& op,
                   const std::function<void(hetcclDataType_t, hetcclRedOp_t, size_t)>& call);

  // Issues an operation inside the open coalescing block (hetccl_coalesce.cc).
  c10::intrusive_ptr<c10d::Work> launchCoalesced(c10d::OpType op, const char* name,
                                                 const std::vector<at::Tensor*>& touched,
                                                 std::vector<at::Tensor> results,
                                                 std::vector<std::pair<at::Tensor, at::Tensor*>>& copyBack,
                                                 const Issue& issue);

  struct Coalescing {                                         // the open block
    std::vector<std::pair<at::Tensor, at::Tensor>> copyBack;  // (user's tensor, staged copy)
    std::vector<at::Tensor> outputs;
    std::vector<c10::intrusive_ptr<HetcclWork>> works;
    std::shared_ptr<c10::Event> done;  // GPU rank: recorded when the block is issued
  };
  std::unique_ptr<Coalescing> coalescing_;
  std::shared_ptr<CommHandle> comm_;
  c10::optional<at::Device> gpu_;      // set on a GPU rank
  c10::optional<c10::Stream> stream_;  // the side stream collectives run on (GPU rank)
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  std::string storePrefix_;         // this backend's keys in the store
  uint64_t monitoredBarriers_ = 0;  // calls so far (the same on every rank)
};

// Creates the backend for torch.distributed (store, rank, size, timeout);
// device and group come from HETCCL_DEVICE / HETCCL_GROUP or are chosen by
// hetccl_torch's Python side.
c10::intrusive_ptr<BackendBase> createBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout, const std::string& device,
                                              const std::string& group);

// The CUDA stream handle behind a torch stream (torch 2.x).
void* nativeStream(const c10::Stream& s);

// Maps a tensor dtype to hetccl's; false for types hetccl does not know
// (complex and the like), which move as bytes.
bool knownType(at::ScalarType t, hetcclDataType_t* dt);

// Maps a tensor dtype to hetccl's; raises for types hetccl cannot reduce.
hetcclDataType_t dataType(at::ScalarType t);

}  // namespace hetccl_torch
