#include "transport/ucx/ucx_api.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "core/settings.h"
#include "core/error.h"
#include "core/log.h"

namespace hetccl::ucx {
namespace {

template <typename F>
void bind(void* lib, F& f, const char* name, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) throwError(hetcclSystemError, "UCX: " + path + " lacks " + name + " (UCX 1.10 or newer is needed)");
}

std::unique_ptr<UcxApi> open() {
  std::string path = settings::kUcxLib.get();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    throwError(hetcclSystemError, "UCX: cannot load " + path + " (" + (e ? e : "?") +
                                      "); install UCX (Debian: libucx0) or set HETCCL_UCX_LIB");
  }
  auto api = std::make_unique<UcxApi>();
  api->path = path;
  void (*getVersion)(unsigned*, unsigned*, unsigned*) = nullptr;
  bind(lib, getVersion, "ucp_get_version", path);
  getVersion(&api->major, &api->minor, &api->release);
  bind(lib, api->configRead, "ucp_config_read", path);
  bind(lib, api->configRelease, "ucp_config_release", path);
  bind(lib, api->initVersion, "ucp_init_version", path);
  bind(lib, api->cleanup, "ucp_cleanup", path);
  bind(lib, api->contextQuery, "ucp_context_query", path);
  bind(lib, api->memMap, "ucp_mem_map", path);
  bind(lib, api->memUnmap, "ucp_mem_unmap", path);
  bind(lib, api->rkeyPack, "ucp_rkey_pack", path);
  bind(lib, api->rkeyBufferRelease, "ucp_rkey_buffer_release", path);
  bind(lib, api->epRkeyUnpack, "ucp_ep_rkey_unpack", path);
  bind(lib, api->rkeyDestroy, "ucp_rkey_destroy", path);
  bind(lib, api->putNbx, "ucp_put_nbx", path);
  bind(lib, api->epFlushNbx, "ucp_ep_flush_nbx", path);
  bind(lib, api->workerCreate, "ucp_worker_create", path);
  bind(lib, api->workerDestroy, "ucp_worker_destroy", path);
  bind(lib, api->workerGetAddress, "ucp_worker_get_address", path);
  bind(lib, api->workerReleaseAddress, "ucp_worker_release_address", path);
  bind(lib, api->workerProgress, "ucp_worker_progress", path);
  bind(lib, api->epCreate, "ucp_ep_create", path);
  bind(lib, api->epCloseNbx, "ucp_ep_close_nbx", path);
  bind(lib, api->tagSendNbx, "ucp_tag_send_nbx", path);
  bind(lib, api->tagSendSyncNbx, "ucp_tag_send_sync_nbx", path);
  bind(lib, api->tagRecvNbx, "ucp_tag_recv_nbx", path);
  bind(lib, api->requestCheckStatus, "ucp_request_check_status", path);
  bind(lib, api->requestCancel, "ucp_request_cancel", path);
  bind(lib, api->requestFree, "ucp_request_free", path);
  bind(lib, api->statusString, "ucs_status_string", path);
  if (api->major != UCP_API_MAJOR)
    throwError(hetcclSystemError, "UCX: " + path + " is version " + std::to_string(api->major) + "." +
                                      std::to_string(api->minor) + ", hetccl was built for " +
                                      std::to_string(UCP_API_MAJOR) + ".x");
  LOG_INFO(kTransport, "UCX %u.%u.%u from %s", api->major, api->minor, api->release, path.c_str());
  return api;
}

}  // namespace

const UcxApi& loadUcxApi() {
  static std::mutex mu;
  static UcxApi* api = nullptr;  // never freed: UCX stays loaded
  std::lock_guard<std::mutex> g(mu);
  if (!api) api = open().release();
  return *api;
}

}  // namespace hetccl::ucx
