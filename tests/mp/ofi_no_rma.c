/* libfabric as a provider without RMA would show it: a library loaded as
 * HETCCL_OFI_LIB that forwards hetccl's entry points to the real libfabric
 * (libfabric.so.1) but answers a request for FI_RMA with no provider
 * (-FI_ENODATA), as fi_getinfo does where none offers it. Every provider
 * on the machines the tests run on has FI_RMA (tcp, shm, udp, sockets). */
#include <dlfcn.h>
#include <stddef.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

static void* real(const char* name) {
  static void* lib = NULL;
  if (!lib) lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  return lib ? dlsym(lib, name) : NULL;
}

uint32_t fi_version(void) {
  uint32_t (*f)(void) = (uint32_t(*)(void))real("fi_version");
  return f ? f() : 0;
}

int fi_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const struct fi_info* hints,
               struct fi_info** info) {
  if (hints && (hints->caps & FI_RMA)) return -FI_ENODATA;
  int (*f)(uint32_t, const char*, const char*, uint64_t, const struct fi_info*, struct fi_info**) = (int (*)(
      uint32_t, const char*, const char*, uint64_t, const struct fi_info*, struct fi_info**))real("fi_getinfo");
  return f ? f(version, node, service, flags, hints, info) : -FI_ENOSYS;
}

void fi_freeinfo(struct fi_info* info) {
  void (*f)(struct fi_info*) = (void (*)(struct fi_info*))real("fi_freeinfo");
  if (f) f(info);
}

struct fi_info* fi_dupinfo(const struct fi_info* info) {
  struct fi_info* (*f)(const struct fi_info*) = (struct fi_info * (*)(const struct fi_info*)) real("fi_dupinfo");
  return f ? f(info) : NULL;
}

int fi_fabric(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context) {
  int (*f)(struct fi_fabric_attr*, struct fid_fabric**, void*) =
      (int (*)(struct fi_fabric_attr*, struct fid_fabric**, void*))real("fi_fabric");
  return f ? f(attr, fabric, context) : -FI_ENOSYS;
}

const char* fi_strerror(int errnum) {
  const char* (*f)(int) = (const char* (*)(int))real("fi_strerror");
  return f ? f(errnum) : "fi_strerror missing";
}
