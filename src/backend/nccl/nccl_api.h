// The NCCL ABI as the nccl and rccl backends use it: the types, declared here
// (nccl.h is not needed at build time, so one build loads NCCL or RCCL), and a
// table of the library's functions filled by dlopen + dlsym at run time.
// A loaded library is never unloaded; tables are cached per path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hetccl::nccl {

// NCCL's values (nccl.h); enums with a fixed int type, as in the C ABI.
enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

// Values 0..11 equal hetccl's DataType (int8 .. float8e5m2).
enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
};

// Built-in ops; ncclRedOpCreatePreMulSum returns further values.
enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

enum ncclScalarResidence_t : int { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 };

struct ncclComm;
using ncclComm_t = ncclComm*;
using cudaStream_t = void*;  // hipStream_t for RCCL: also an opaque pointer

constexpr size_t kUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

// The head of ncclConfig_t that every NCCL since 2.17 reads (later fields
// follow in later versions; the library reads `size` bytes and fills what a
// caller of `version` could not set). Unset ints are INT_MIN.
struct ncclConfigHead {
  size_t size;
  unsigned magic;    // 0xcafebeef
  unsigned version;  // the NCCL version the caller was built for
  int blocking;
  int cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
  int splitShare;
};
constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr size_t kConfigBlockingOffset = offsetof(ncclConfigHead, blocking);

// Version codes as ncclGetVersion returns them (2.28.5 -> 22805).
constexpr int kMinVersion = 21200;  // ncclRedOpCreatePreMulSum, ncclAvg, bfloat16
constexpr int kFp8Version = 22400;  // ncclFloat8e4m3, ncclFloat8e5m2

struct NcclApi {
  std::string flavor;  // "nccl" or "rccl"
  std::string path;    // the file loaded (as the loader resolved it where known)
  int version = 0;     // ncclGetVersion's code

  ncclResult_t (*getVersion)(int* version) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId* uniqueId) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t comm) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t comm) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t comm, ncclResult_t* asyncError) = nullptr;
  const char* (*getErrorString)(ncclResult_t result) = nullptr;
  const char* (*getLastError)(ncclComm_t comm) = nullptr;  // optional (NCCL >= 2.13)
  ncclResult_t (*allReduce)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*reduceScatter)(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*allGather)(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*broadcast)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*reduce)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*send)(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) = nullptr;
  ncclResult_t (*recv)(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) = nullptr;
  ncclResult_t (*redOpDestroy)(ncclRedOp_t op, ncclComm_t comm) = nullptr;
  // Optional: NCCL >= 2.28 names it ncclAlltoAll, RCCL ncclAllToAll.
  ncclResult_t (*allToAll)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream) = nullptr;

  // Optional (2.14+): init with an ncclConfig_t, e.g. non-blocking.
  ncclResult_t (*commInitRankConfig)(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     void* config) = nullptr;
  // Optional, by version: what the drop-in passes through to the library of
  // a one-group communicator. Struct and window arguments are opaque here.
  ncclResult_t (*commRegister)(ncclComm_t comm, void* buff, size_t size, void** handle) = nullptr;
  ncclResult_t (*commDeregister)(ncclComm_t comm, void* handle) = nullptr;
  ncclResult_t (*commWindowRegister)(ncclComm_t comm, void* buff, size_t size, void** win, int winFlags) = nullptr;
  ncclResult_t (*commWindowDeregister)(ncclComm_t comm, void* win) = nullptr;
  ncclResult_t (*winGetUserPtr)(ncclComm_t comm, void* win, void** userPtr) = nullptr;
  ncclResult_t (*memAlloc)(void** ptr, size_t size) = nullptr;
  ncclResult_t (*memFree)(void* ptr) = nullptr;
  ncclResult_t (*devCommCreate)(ncclComm_t comm, const void* reqs, void* outDevComm) = nullptr;
  ncclResult_t (*devCommDestroy)(ncclComm_t comm, const void* devComm) = nullptr;
  ncclResult_t (*commQueryProperties)(ncclComm_t comm, void* props) = nullptr;
  ncclResult_t (*commRevoke)(ncclComm_t comm, int revokeFlags) = nullptr;
  ncclResult_t (*commSuspend)(ncclComm_t comm, int flags) = nullptr;
  ncclResult_t (*commResume)(ncclComm_t comm) = nullptr;
  ncclResult_t (*commMemStats)(ncclComm_t comm, int stat, uint64_t* value) = nullptr;
  ncclResult_t (*putSignal)(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, void* peerWin,
                            size_t peerWinOffset, int sigIdx, int ctx, unsigned flags, ncclComm_t comm,
                            cudaStream_t stream) = nullptr;
  ncclResult_t (*signal)(int peer, int sigIdx, int ctx, unsigned flags, ncclComm_t comm, cudaStream_t stream) = nullptr;
  ncclResult_t (*waitSignal)(int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream) = nullptr;
  void (*resetDebugInit)() = nullptr;
  // Optional (2.30+): the Parameter API; handles are opaque here. The drop-in
  // forwards keys that are not hetccl's to these.
  ncclResult_t (*paramBind)(void** out, const char* key) = nullptr;
  ncclResult_t (*paramGetI8)(void* h, int8_t* out) = nullptr;
  ncclResult_t (*paramGetI16)(void* h, int16_t* out) = nullptr;
  ncclResult_t (*paramGetI32)(void* h, int32_t* out) = nullptr;
  ncclResult_t (*paramGetI64)(void* h, int64_t* out) = nullptr;
  ncclResult_t (*paramGetU8)(void* h, uint8_t* out) = nullptr;
  ncclResult_t (*paramGetU16)(void* h, uint16_t* out) = nullptr;
  ncclResult_t (*paramGetU32)(void* h, uint32_t* out) = nullptr;
  ncclResult_t (*paramGetU64)(void* h, uint64_t* out) = nullptr;
  ncclResult_t (*paramGetStr)(void* h, const char** out) = nullptr;
  ncclResult_t (*paramGet)(void* h, void* out, int maxLen, int* len) = nullptr;
  ncclResult_t (*paramGetParameter)(const char* key, const char** value, int* valueLen) = nullptr;
  ncclResult_t (*paramGetAllParameterKeys)(const char*** table, int* tableLen) = nullptr;
  void (*paramDumpAll)() = nullptr;
};

// The library of `flavor` ("nccl" or "rccl"): HETCCL_NCCL_LIB / HETCCL_RCCL_LIB
// when set, else the default locations (nccl: libnccl.so.2 on the loader's
// search path, /usr/local/cuda/lib64, beside an already loaded libcudart;
// rccl: librccl.so.1, librccl.so, /opt/rocm/lib). Loaded once per path,
// thread-safe. Throws hetcclSystemError when no library opens,
// hetcclInvalidUsage when it lacks a required function or is older than 2.12.
const NcclApi& loadNcclApi(const std::string& flavor);
// The same from an explicit path (tests; tools).
const NcclApi& loadNcclApiFromPath(const std::string& path, const std::string& flavor);

// "2.28.5" for 22805 (and the pre-2.9 scheme: 2708 -> "2.7.8").
std::string ncclVersionString(int code);
// "nccl" -> "NCCL", "rccl" -> "RCCL" (for messages).
std::string ncclLibName(const std::string& flavor);
// Where the library of `flavor` is looked for when its variable
// (HETCCL_NCCL_LIB...) is unset, in order.
std::vector<std::string> ncclSearchPaths(const std::string& flavor);

}  // namespace hetccl::nccl
