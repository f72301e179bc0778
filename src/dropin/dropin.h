// The NCCL-ABI drop-in (libnccl.so.2; librccl.so.1 from the same sources
// with HETCCL_DROPIN_RCCL): what its entry points share. Communicators are
// hetccl communicators whose device kind defaults to cuda (hip) and whose
// groups run the real vendor library, loaded by path (the nccl backend).
//
// Rules the entry points follow:
// - each is written once, as nccl*; its pnccl* twin is an alias
//   (linker aliases from src/dropin/exports.txt), so profilers that wrap the
//   API find both;
// - none calls another nccl* export (that would go through the process's
//   symbol lookup): they share static helpers and hetccl's internals;
// - in a communicator of one group whose backend is an NCCL-ABI library,
//   what hetccl has no part in (registration, windows, device
//   communicators...) goes to that library with its own communicator;
//   elsewhere such calls are ncclInvalidUsage with a message naming the
//   function and why.
#pragma once

#include <cstddef>
#include <string>

#include "api/guard.h"
#include "backend/nccl/nccl_api.h"
#include "comm/comm.h"

#ifdef HETCCL_DROPIN_RCCL
#define DROPIN_FLAVOR "rccl"
#define DROPIN_SONAME "librccl.so.1"
#define DROPIN_DEVICE "hip"
#else
#define DROPIN_FLAVOR "nccl"
#define DROPIN_SONAME "libnccl.so.2"
#define DROPIN_DEVICE "cuda"
#endif

namespace hetccl::dropin {

using ncclResult_t = int;
using ncclComm_t = hetcclComm_t;
using ncclUniqueId = nccl::ncclUniqueId;
static_assert(sizeof(ncclUniqueId) == sizeof(hetcclUniqueId), "unique ids differ in size");

// The NCCL release whose whole API this library serves (passes through,
// implements across groups, or refuses with a message): what ncclGetVersion
// reports at most. See dropinVersion().
constexpr int kServedVersion = 22809;  // 2.28.9

// The device kind of ranks created here: HETCCL_DEVICE, else cuda (hip).
std::string deviceKind();

// Communicator options from the caller's ncclConfig_t (null: defaults):
// its head is read (size, magic, blocking) and the whole struct is kept for
// the vendor library's own init. Throws InvalidArgument on a config that
// NCCL_CONFIG_INITIALIZER did not make or of an impossible size.
CommOptions optionsFrom(const void* ncclConfig);

// Throws InvalidUsage when another NCCL-ABI library comes first in the
// process's symbol lookup (calls by name could reach either library).
void refuseForeignNccl();

// The vendor library of this flavor if it loads (cached), else null.
const nccl::NcclApi* vendorLibrary();

// What ncclGetVersion reports: the vendor library's version, at most
// kServedVersion; kServedVersion where none loads.
int dropinVersion();

struct Vendor {
  const nccl::NcclApi* api = nullptr;
  nccl::ncclComm_t comm = nullptr;
  explicit operator bool() const { return api && comm; }
};
// Under a CommRef. The group's vendor library and its communicator when the
// group backend is an NCCL-ABI library (else empty); oneGroup: only when the
// communicator is that one group.
Vendor vendorOf(hetcclComm* c, bool oneGroup);

// ncclInvalidUsage with "<what> is not supported by hetccl<where>".
[[noreturn]] void refuse(const std::string& what, const std::string& why);

// Runs a vendor call and turns its status into an hetccl error naming it.
void vendorCheck(const Vendor& v, nccl::ncclResult_t r, const char* fn);

}  // namespace hetccl::dropin
