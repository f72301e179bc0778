// The NCCL-ABI group backend ("nccl" for NVIDIA groups, "rccl" for AMD ones):
// each call is the library's own, through the function table of nccl_api.h,
// enqueued on the caller's stream and never waited for. The caller has made
// the rank's device current; this backend never selects a device.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/nccl/nccl_api.h"

namespace hetccl {

class NcclBackend : public Backend {
 public:
  // Loads the library of `flavor` ("nccl" or "rccl"); throws as loadNcclApi.
  NcclBackend(const BackendContext& ctx, const std::string& flavor);
  // Uses the given table (tests pass a table of fakes); api must outlive this.
  NcclBackend(const BackendContext& ctx, const nccl::NcclApi& api);
  // ncclCommDestroy unless aborted; never throws (a failure is logged).
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  const char* name() const override { return api_.flavor.c_str(); }
  const nccl::NcclApi& api() const { return api_; }
  // The library's communicator (null before connect and after abort): the
  // drop-in hands it calls that hetccl passes through in one group.
  nccl::ncclComm_t vendorComm() const { return aborted_.load() ? nullptr : comm_.load(); }

  void makeId(void* out) override;
  void connect(const void* leaderId) override;
  void abort() override;
  hetcclResult_t asyncError() override;
  std::string asyncErrorText() override;

  void allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) override;
  void reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                     Stream s) override;
  void allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) override;
  void broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) override;
  void reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root, Stream s) override;
  void send(const void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void recv(void* buf, size_t count, DataType dt, int peer, Stream s) override;
  void groupStart() override;
  void groupEnd() override;

 private:
  // The communicator, for an op; throws once aborted or before connect.
  nccl::ncclComm_t comm() const;
  // Throws an Error naming `fn`, the library's text and its last error unless
  // r is success (or in progress).
  void check(nccl::ncclResult_t r, const char* fn) const;
  std::string failureText(nccl::ncclResult_t r, const char* fn) const;
  std::vector<uint8_t> initConfig() const;
  void waitInit();
  nccl::ncclDataType_t ncclType(DataType dt) const;
  // Runs enqueue(ncclOp) with `op` as an NCCL op: a built-in one, ncclAvg, or
  // a PreMulSum op made for this call and destroyed once enqueued.
  template <class Enqueue>
  void withOp(const ReduceOp& op, DataType dt, nccl::ncclComm_t c, Enqueue&& enqueue);

  const nccl::NcclApi& api_;
  std::mutex mu_;  // orders connect, abort and asyncError around comm_'s lifetime
  std::atomic<nccl::ncclComm_t> comm_{nullptr};
  std::atomic<bool> aborted_{false};
  int groupDepth_ = 0;
  std::string asyncText_;  // under mu_
};

// The hetccl status an NCCL status stands for (ncclInProgress -> hetcclInProgress).
hetcclResult_t ncclToHetccl(nccl::ncclResult_t r);

}  // namespace hetccl
