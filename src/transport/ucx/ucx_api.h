// The UCP functions the UCX transport uses, loaded with dlopen (libucp.so.0)
// so that one libhetccl serves machines with and without UCX. Types and
// constants come from UCX's headers (Debian's libucx-dev) at build time.
#pragma once

#include <string>

#include <ucp/api/ucp.h>

namespace hetccl::ucx {

struct UcxApi {
  std::string path;
  unsigned major = 0, minor = 0, release = 0;  // ucp_get_version

  ucs_status_t (*configRead)(const char*, const char*, ucp_config_t**) = nullptr;
  void (*configRelease)(ucp_config_t*) = nullptr;
  ucs_status_t (*initVersion)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*, ucp_context_h*) = nullptr;
  void (*cleanup)(ucp_context_h) = nullptr;
  ucs_status_t (*contextQuery)(ucp_context_h, ucp_context_attr_t*) = nullptr;
  ucs_status_t (*memMap)(ucp_context_h, const ucp_mem_map_params_t*, ucp_mem_h*) = nullptr;
  ucs_status_t (*memUnmap)(ucp_context_h, ucp_mem_h) = nullptr;
  ucs_status_t (*rkeyPack)(ucp_context_h, ucp_mem_h, void**, size_t*) = nullptr;
  void (*rkeyBufferRelease)(void*) = nullptr;
  ucs_status_t (*epRkeyUnpack)(ucp_ep_h, const void*, ucp_rkey_h*) = nullptr;
  void (*rkeyDestroy)(ucp_rkey_h) = nullptr;
  ucs_status_ptr_t (*putNbx)(ucp_ep_h, const void*, size_t, uint64_t, ucp_rkey_h, const ucp_request_param_t*) = nullptr;
  ucs_status_ptr_t (*epFlushNbx)(ucp_ep_h, const ucp_request_param_t*) = nullptr;
  ucs_status_t (*workerCreate)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*) = nullptr;
  void (*workerDestroy)(ucp_worker_h) = nullptr;
  ucs_status_t (*workerGetAddress)(ucp_worker_h, ucp_address_t**, size_t*) = nullptr;
  void (*workerReleaseAddress)(ucp_worker_h, ucp_address_t*) = nullptr;
  unsigned (*workerProgress)(ucp_worker_h) = nullptr;
  ucs_status_t (*epCreate)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*) = nullptr;
  ucs_status_ptr_t (*epCloseNbx)(ucp_ep_h, const ucp_request_param_t*) = nullptr;
  ucs_status_ptr_t (*tagSendNbx)(ucp_ep_h, const void*, size_t, ucp_tag_t, const ucp_request_param_t*) = nullptr;
  ucs_status_ptr_t (*tagSendSyncNbx)(ucp_ep_h, const void*, size_t, ucp_tag_t, const ucp_request_param_t*) = nullptr;
  ucs_status_ptr_t (*tagRecvNbx)(ucp_worker_h, void*, size_t, ucp_tag_t, ucp_tag_t,
                                 const ucp_request_param_t*) = nullptr;
  ucs_status_t (*requestCheckStatus)(void*) = nullptr;
  void (*requestCancel)(ucp_worker_h, void*) = nullptr;
  void (*requestFree)(void*) = nullptr;
  const char* (*statusString)(ucs_status_t) = nullptr;
};

// Loads libucp (HETCCL_UCX_LIB, else libucp.so.0) once. Throws
// hetcclSystemError naming what failed when it cannot.
const UcxApi& loadUcxApi();

}  // namespace hetccl::ucx
