// The libfabric entry points the ofi transport uses, loaded with dlopen
// (HETCCL_OFI_LIB, default libfabric.so.1) so that one libhetccl serves
// machines with and without libfabric. Types, constants and the inline calls
// that go through an object's operation tables (fi_domain, fi_tsend,
// fi_cq_read, fi_mr_reg...) come from libfabric's headers (Debian's
// libfabric-dev) at build time; only the calls below are library symbols.
#pragma once

#include <cstdint>
#include <string>

#include <rdma/fabric.h>

namespace hetccl::ofi {

struct OfiApi {
  std::string path;
  uint32_t version = 0;  // fi_version(): FI_MAJOR << 16 | FI_MINOR

  int (*getinfo)(uint32_t, const char*, const char*, uint64_t, const fi_info*, fi_info**) = nullptr;
  void (*freeinfo)(fi_info*) = nullptr;
  fi_info* (*dupinfo)(const fi_info*) = nullptr;
  int (*fabric)(fi_fabric_attr*, fid_fabric**, void*) = nullptr;
  const char* (*strerror)(int) = nullptr;
};

// Loads libfabric once. Throws hetcclSystemError naming the library and
// what failed when it cannot.
const OfiApi& loadOfiApi();

// The libfabric API version hetccl asks for (the oldest it needs).
constexpr uint32_t kApiVersion = FI_VERSION(1, 10);

// The providers that offer a reliable tagged endpoint (FI_EP_RDM, FI_TAGGED,
// FI_DIRECTED_RECV) with hetccl's hints, narrowed to `provider` where it is
// not empty; with `rma`, those that also write into a peer's registered
// memory (FI_RMA, FI_WRITE, FI_REMOTE_WRITE). The caller frees the list with
// api.freeinfo. Throws hetcclSystemError with libfabric's reason where none
// fits.
fi_info* findRdmProviders(const OfiApi& api, const std::string& provider, bool rma = false);

// The entry of `list` the transport opens: libfabric lists the best first,
// but a socket provider also lists each interface's IPv6 link-local
// address (fe80::/10), which peers on other hosts cannot reach without a
// scope: such entries are taken only where nothing else is listed.
const fi_info* preferredInfo(const fi_info* list);

// Whether a provider name ("efa", "verbs;ofi_rxm", "tcp;ofi_rxm") is one of
// libfabric's emulations over plain networking or shared memory (tcp,
// sockets, udp, shm, net and their ofi_rxm/ofi_rxd forms), rather than
// hardware made for it (efa, cxi, verbs, psm3, opx...).
bool softwareProvider(const std::string& provName);

// The first hardware provider this rank's libfabric offers (as
// findRdmProviders, HETCCL_OFI_PROVIDER applied), or "" where libfabric does
// not load or offers none. For HETCCL_TRANSPORT=auto.
std::string hardwareRdmProvider();

}  // namespace hetccl::ofi
