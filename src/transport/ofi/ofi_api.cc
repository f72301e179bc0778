#include "transport/ofi/ofi_api.h"

#include <dlfcn.h>
#include <netinet/in.h>

#include <cstring>
#include <memory>
#include <mutex>

#include <rdma/fi_errno.h>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"

namespace hetccl::ofi {
namespace {

template <typename F>
void bind(void* lib, F& f, const char* name, const std::string& path) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f)
    throwError(hetcclSystemError, "libfabric: " + path + " lacks " + name + " (libfabric 1.10 or newer is needed)");
}

std::unique_ptr<OfiApi> open() {
  const std::string path = settings::kOfiLib.get();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    throwError(hetcclSystemError, "libfabric: cannot load " + path + " (" + (e ? e : "?") +
                                      "); install libfabric (Debian: libfabric1) or set HETCCL_OFI_LIB");
  }
  auto api = std::make_unique<OfiApi>();
  api->path = path;
  uint32_t (*version)() = nullptr;
  bind(lib, version, "fi_version", path);
  api->version = version();
  bind(lib, api->getinfo, "fi_getinfo", path);
  bind(lib, api->freeinfo, "fi_freeinfo", path);
  bind(lib, api->dupinfo, "fi_dupinfo", path);
  bind(lib, api->fabric, "fi_fabric", path);
  bind(lib, api->strerror, "fi_strerror", path);
  if (api->version < kApiVersion)
    throwError(hetcclSystemError, "libfabric: " + path + " is version " + std::to_string(FI_MAJOR(api->version)) + "." +
                                      std::to_string(FI_MINOR(api->version)) + ", hetccl needs 1.10 or newer");
  LOG_INFO(kTransport, "libfabric %u.%u from %s", FI_MAJOR(api->version), FI_MINOR(api->version), path.c_str());
  return api;
}

}  // namespace

const OfiApi& loadOfiApi() {
  static std::mutex mu;
  static OfiApi* api = nullptr;  // never freed: libfabric stays loaded
  std::lock_guard<std::mutex> g(mu);
  if (!api) api = open().release();
  return *api;
}

fi_info* findRdmProviders(const OfiApi& api, const std::string& provider, bool rma) {
  fi_info* hints = api.dupinfo(nullptr);
  if (!hints) throwError(hetcclSystemError, "libfabric: fi_allocinfo failed");
  // Reliable datagram endpoints with tagged messages matched by tag and
  // source. hetccl passes an fi_context2 with every operation, and says
  // which registration modes it handles: it registers what it sends and
  // receives where the provider asks (FI_MR_LOCAL, on the endpoint with
  // FI_MR_ENDPOINT), and takes the provider's keys (FI_MR_PROV_KEY). Device
  // memory (FI_HMEM) is not asked for: hetccl hands transports host memory.
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
  if (rma) hints->caps |= FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;  // run() comes from one thread at a time
  hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
  hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;  // hetccl polls the completion queue in run()
  hints->tx_attr->msg_order = FI_ORDER_NONE;               // every message has its own tag
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());  // freed by freeinfo
  fi_info* list = nullptr;
  const int rc = api.getinfo(kApiVersion, nullptr, nullptr, 0, hints, &list);
  api.freeinfo(hints);
  if (rc != 0 || !list)
    throwError(hetcclSystemError,
               std::string("libfabric: no provider offers reliable tagged messages") +
                   (rma ? " and RMA writes (FI_RMA)" : "") +
                   (provider.empty() ? std::string() : " under the name '" + provider + "' (HETCCL_OFI_PROVIDER)") +
                   " (fi_getinfo: " + api.strerror(-rc) +
                   "); fi_info -l lists the providers, FI_PROVIDER narrows them");
  return list;
}

const fi_info* preferredInfo(const fi_info* list) {
  for (const fi_info* i = list; i; i = i->next) {
    bool linkLocal = false;
    if (i->addr_format == FI_SOCKADDR_IN6 && i->src_addr && i->src_addrlen >= sizeof(sockaddr_in6)) {
      const auto* a = static_cast<const sockaddr_in6*>(i->src_addr);
      linkLocal = a->sin6_addr.s6_addr[0] == 0xfe && (a->sin6_addr.s6_addr[1] & 0xc0) == 0x80;
    }
    if (!linkLocal) return i;
  }
  return list;
}

bool softwareProvider(const std::string& provName) {
  // "core;utility": the first name is the provider that reaches the network.
  const std::string core = provName.substr(0, provName.find(';'));
  for (const char* soft : {"tcp", "sockets", "udp", "shm", "net", "ofi_rxm", "ofi_rxd"})
    if (core == soft) return true;
  return false;
}

std::string hardwareRdmProvider() {
  try {
    const OfiApi& api = loadOfiApi();
    fi_info* list = findRdmProviders(api, settings::kOfiProvider.get());
    std::string found;
    for (fi_info* i = list; i && found.empty(); i = i->next)
      if (i->fabric_attr && i->fabric_attr->prov_name && !softwareProvider(i->fabric_attr->prov_name))
        found = i->fabric_attr->prov_name;
    api.freeinfo(list);
    return found;
  } catch (const Error& e) {
    LOG_INFO(kTransport, "ofi: no hardware provider here: %s", e.what());
    return "";
  }
}

}  // namespace hetccl::ofi
