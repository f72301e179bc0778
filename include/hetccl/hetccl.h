/*
 * hetccl — collective communication across GPU vendors and CPU ranks.
 *
 * Public C99 API. Calls, types and enum values follow NCCL's API so that code
 * written for NCCL maps one to one (ncclX -> hetcclX). Additions:
 * hetcclCommInitFromEnv, hetcclCommGetInfo, hetcclGather, hetcclScatter.
 *
 * Streams: device ranks pass their vendor stream (cudaStream_t / hipStream_t)
 * as an opaque pointer; host (CPU-memory) ranks pass NULL and a call completes
 * before it returns (or at hetcclGroupEnd inside a group).
 */
#ifndef HETCCL_HETCCL_H_
#define HETCCL_HETCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HETCCL_MAJOR 0
#define HETCCL_MINOR 1
#define HETCCL_PATCH 0
#define HETCCL_VERSION_CODE (HETCCL_MAJOR * 10000 + HETCCL_MINOR * 100 + HETCCL_PATCH)

typedef struct hetcclComm* hetcclComm_t;
#define HETCCL_COMM_NULL NULL

/* Opaque stream handle: a cudaStream_t or hipStream_t, or NULL on host ranks. */
typedef void* hetcclStream_t;

#define HETCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[HETCCL_UNIQUE_ID_BYTES];
} hetcclUniqueId;

typedef enum {
  hetcclSuccess = 0,
  hetcclUnhandledDeviceError = 1, /* NCCL: ncclUnhandledCudaError */
  hetcclSystemError = 2,
  hetcclInternalError = 3,
  hetcclInvalidArgument = 4,
  hetcclInvalidUsage = 5,
  hetcclRemoteError = 6,
  hetcclInProgress = 7,
  hetcclNumResults = 8
} hetcclResult_t;

typedef enum {
  hetcclInt8 = 0,
  hetcclChar = 0,
  hetcclUint8 = 1,
  hetcclInt32 = 2,
  hetcclInt = 2,
  hetcclUint32 = 3,
  hetcclInt64 = 4,
  hetcclUint64 = 5,
  hetcclFloat16 = 6,
  hetcclHalf = 6,
  hetcclFloat32 = 7,
  hetcclFloat = 7,
  hetcclFloat64 = 8,
  hetcclDouble = 8,
  hetcclBfloat16 = 9,
  hetcclFloat8e4m3 = 10,
  hetcclFloat8e5m2 = 11,
  hetcclNumTypes = 12
} hetcclDataType_t;

/* Built-in ops. hetcclRedOpCreatePreMulSum returns further values, from
 * hetcclNumOps up, valid only on the communicator that created them. */
typedef enum {
  hetcclSum = 0,
  hetcclProd = 1,
  hetcclMax = 2,
  hetcclMin = 3,
  hetcclAvg = 4,
  hetcclNumOps = 5,
  hetcclMaxRedOp = 0x7fffffff
} hetcclRedOp_t;

/* Where the PreMulSum scalar lives (NCCL's ncclScalarResidence_t). */
typedef enum { hetcclScalarDevice = 0, hetcclScalarHostImmediate = 1 } hetcclScalarResidence_t;

#define HETCCL_CONFIG_UNDEF_INT INT_MIN
#define HETCCL_CONFIG_MAGIC 0xcafebeefu
#define HETCCL_CONFIG_VERSION 3
#define HETCCL_SPLIT_NOCOLOR (-1)

/* Communicator options. Versioned by size/magic/version: fields are only ever
 * appended, and a caller built against an older header passes a smaller size,
 * so the library reads only what the caller has. Unset ints are INT_MIN. */
typedef struct hetcclConfig_v2 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;          /* 0: init and collectives may return hetcclInProgress */
  int timeoutSeconds;    /* overrides HETCCL_TIMEOUT_S for this communicator */
  const char* groupName; /* overrides HETCCL_GROUP for this rank */
  const char*
      transport; /* overrides HETCCL_TRANSPORT: "auto", "tcp", "shm", "ucx", "ofi", "net", "intra=shm,inter=tcp" */
  /* version 2 */
  const char* device;  /* overrides HETCCL_DEVICE: "host", "cuda", "hip", "emu" (GPU ranks use the
                          calling thread's current device, as NCCL does) */
  const char* backend; /* overrides HETCCL_BACKEND: "host", "nccl", "rccl" */
  /* version 3 */
  const char* site; /* overrides HETCCL_SITE / HETCCL_SITE_MAP for this rank ("" : no site) */
} hetcclConfig_t;

#define HETCCL_CONFIG_INITIALIZER                                                                \
  {                                                                                              \
    sizeof(hetcclConfig_t), HETCCL_CONFIG_MAGIC, HETCCL_CONFIG_VERSION, HETCCL_CONFIG_UNDEF_INT, \
        HETCCL_CONFIG_UNDEF_INT, NULL, NULL, NULL, NULL, NULL                                    \
  }

/* Marks a name kept for programs built against an older header. */
#if defined(__GNUC__) || defined(__clang__)
#define HETCCL_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define HETCCL_DEPRECATED(why)
#endif

/* How a call's data crossed between groups (hetcclCommInfo_t.pathCalls):
 * none (one group: the vendor library alone), host (host memory to the
 * transport), staged (device memory through pinned staging), device (the
 * device border: copy engines and shared memory). Number 3 is retired (it
 * was the direct path: device memory handed to the transport, the calling
 * thread waiting): no call takes it and its count stays 0; the value keeps
 * its number, and its old name still compiles, with a warning. */
typedef enum {
  hetcclPathNone = 0,
  hetcclPathHost = 1,
  hetcclPathStaged = 2,
  hetcclPathRetired = 3,
  hetcclPathDirect HETCCL_DEPRECATED("the direct path is retired; its count (hetcclPathRetired) stays 0") = 3,
  hetcclPathDevice = 4,
  hetcclNumPaths = 5
} hetcclPath_t;

/* What hetcclCommGetInfo reports. Versioned like hetcclConfig_t: set size
 * before the call; the library fills what fits. */
#define HETCCL_MAX_GROUPS 16
#define HETCCL_NAME_BYTES 32
typedef struct hetcclCommInfo_v1 {
  size_t size;
  int rank;
  int nranks;
  int ngroups;
  int myGroup;     /* index into the arrays below */
  int myGroupRank; /* rank inside my group */
  int groupSize[HETCCL_MAX_GROUPS];
  char groupName[HETCCL_MAX_GROUPS][HETCCL_NAME_BYTES];
  char groupBackend[HETCCL_MAX_GROUPS][HETCCL_NAME_BYTES]; /* "host", "nccl", ... */
  char deviceKind[HETCCL_NAME_BYTES];                      /* this rank's: "host", "cuda", "hip", "emu" */
  char transport[HETCCL_NAME_BYTES];  /* transport in use: "tcp", "shm", "ucx", "ofi", "net", or "<intra>+<inter>"
                                         (e.g. "shm+tcp": peers on this host over shm, on others over tcp) */
  int borderPeers;                    /* ranks of other groups this rank exchanges with in AllReduce */
  char borderPath[HETCCL_NAME_BYTES]; /* how its border data moves: "none" (one group), "host" (host
                                         memory to the transport), "staged" (device memory through
                                         pinned staging), "device" (the device border: copy
                                         engines and shared memory; the calls it does not
                                         take stage) */
  unsigned long long pathCalls[hetcclNumPaths]; /* calls so far by the path they took (hetcclPath_t);
                                                   each call of a group counts once */
  /* appended: sites and encryption (HETCCL_SITE, HETCCL_ENCRYPT) */
  char site[HETCCL_NAME_BYTES];    /* this rank's site ("" : unnamed) */
  char encrypt[HETCCL_NAME_BYTES]; /* the mode: "off", "cross-site" or "all" */
  int encryptedPeers;              /* peers whose link carries AES-256-GCM records */
  int plainPeers;                  /* peers whose link carries plaintext (same-host shm included) */
  /* appended: the border cut (HETCCL_BORDER_CUT) */
  char borderCut[HETCCL_NAME_BYTES]; /* "size" or "bandwidth" */
  double borderGbps;                 /* bandwidth cut: this rank's border link rate in Gbit/s, as given
                                        (HETCCL_LINK_GBPS) or measured at init; 0 under the size cut */
  double borderShare;                /* this rank's part of its group's shards in a large AllReduce across
                                        groups: 1/k under the size cut (k ranks in the group) */
} hetcclCommInfo_t;

/* The HETCCL_* settings this library reads (what hetccl-info prints).
 * Versioned like hetcclConfig_t: set size before the call. */
typedef struct hetcclSetting_v1 {
  size_t size;
  const char* name;  /* "HETCCL_TIMEOUT_S" */
  const char* type;  /* "int", "bytes", "bool", "choice" or "string" */
  const char* value; /* the value in force in this process's environment */
  const char* defaultValue;
  const char* alsoRead; /* a variable read when this one is unset ("NCCL_DEBUG"), or NULL */
  const char* allowed;  /* what it accepts: "an integer from 1 to 31536000" */
  const char* help;
  int fromEnvironment; /* 1 when the environment set it (this name or alsoRead) */
} hetcclSetting_t;

/* What this build can load: comma lists. */
typedef struct hetcclBuildInfo_v1 {
  size_t size;
  char deviceKinds[128]; /* "host,cuda,hip,emu" */
  char transports[128];  /* "tcp,shm,ucx,ofi,net" */
  char backends[128];    /* "host,nccl,rccl" */
} hetcclBuildInfo_t;

/* Version, library and errors */
hetcclResult_t hetcclGetVersion(int* version);
hetcclResult_t hetcclGetSettingCount(int* count);
/* Setting `index` (0 <= index < count); its strings stay valid until this
 * thread calls hetcclGetSetting again. */
hetcclResult_t hetcclGetSetting(int index, hetcclSetting_t* setting);
hetcclResult_t hetcclGetBuildInfo(hetcclBuildInfo_t* info);
const char* hetcclGetErrorString(hetcclResult_t result);
/* Last error text of comm (what, where, which peer); comm may be NULL for
 * errors of calls without a communicator. Thread-local. */
const char* hetcclGetLastError(hetcclComm_t comm);

/* Communicator creation and destruction */
hetcclResult_t hetcclGetUniqueId(hetcclUniqueId* uniqueId);
hetcclResult_t hetcclCommInitRank(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank);
hetcclResult_t hetcclCommInitRankConfig(hetcclComm_t* comm, int nranks, hetcclUniqueId commId, int rank,
                                        hetcclConfig_t* config);
/* Rank, size and rendezvous from the launcher's environment: torchrun
 * (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*),
 * Slurm (SLURM_PROCID, SLURM_NTASKS with HETCCL_COMM_ID=host:port). */
hetcclResult_t hetcclCommInitFromEnv(hetcclComm_t* comm, hetcclConfig_t* config);
hetcclResult_t hetcclCommSplit(hetcclComm_t comm, int color, int key, hetcclComm_t* newcomm, hetcclConfig_t* config);
/* A new communicator of comm's ranks except the excludeCount ranks listed,
 * renumbered in order; the excluded ranks take no part (they may be dead).
 * HETCCL_SHRINK_ABORT ends comm's work first, on every rank (after a rank
 * failed); comm must still be destroyed. NCCL's ncclCommShrink. */
#define HETCCL_SHRINK_DEFAULT 0x00
#define HETCCL_SHRINK_ABORT 0x01
hetcclResult_t hetcclCommShrink(hetcclComm_t comm, const int* excludeRanks, int excludeCount, hetcclComm_t* newcomm,
                                hetcclConfig_t* config, int shrinkFlags);
/* Growing (NCCL's ncclCommGetUniqueId and ncclCommGrow). One rank of comm
 * (the coordinator) makes a grow id, good for one grow and for
 * HETCCL_TIMEOUT_S; the application hands it to the new ranks itself (a
 * file, a socket, another communicator). Every rank of comm then calls
 * hetcclCommGrow(comm, nranks, NULL or the id, -1, ...) and keeps its rank;
 * each new rank calls hetcclCommGrow(NULL, nranks, &id, rank, ...) with a
 * rank from comm's size up to nranks - 1, its group and device from its own
 * config and settings as at init. config NULL: comm's settings (running
 * ranks), the defaults (new ranks). comm stays usable and must be
 * destroyed. A bad argument on any rank fails the grow on every rank. */
hetcclResult_t hetcclCommGetUniqueId(hetcclComm_t comm, hetcclUniqueId* uniqueId);
hetcclResult_t hetcclCommGrow(hetcclComm_t comm, int nranks, const hetcclUniqueId* uniqueId, int rank,
                              hetcclComm_t* newcomm, hetcclConfig_t* config);
hetcclResult_t hetcclCommFinalize(hetcclComm_t comm);
hetcclResult_t hetcclCommDestroy(hetcclComm_t comm);
/* Safe from any thread: releases every waiter of comm, then frees it. */
hetcclResult_t hetcclCommAbort(hetcclComm_t comm);
hetcclResult_t hetcclCommGetAsyncError(hetcclComm_t comm, hetcclResult_t* asyncError);
hetcclResult_t hetcclCommCount(const hetcclComm_t comm, int* count);
hetcclResult_t hetcclCommUserRank(const hetcclComm_t comm, int* rank);
hetcclResult_t hetcclCommGetInfo(const hetcclComm_t comm, hetcclCommInfo_t* info);

/* Reduction ops */
hetcclResult_t hetcclRedOpCreatePreMulSum(hetcclRedOp_t* op, void* scalar, hetcclDataType_t datatype,
                                          hetcclScalarResidence_t residence, hetcclComm_t comm);
hetcclResult_t hetcclRedOpDestroy(hetcclRedOp_t op, hetcclComm_t comm);

/* Collectives. Counts are in elements; AllGather's sendcount and
 * ReduceScatter's recvcount are per rank; AlltoAll, Gather and Scatter move
 * `count` elements per rank pair. Outputs are in global rank order. */
hetcclResult_t hetcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype,
                               hetcclRedOp_t op, hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype, int root,
                               hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclReduce(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype,
                            hetcclRedOp_t op, int root, hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, hetcclDataType_t datatype,
                               hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, hetcclDataType_t datatype,
                                   hetcclRedOp_t op, hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype,
                              hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclGather(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype, int root,
                            hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclScatter(const void* sendbuff, void* recvbuff, size_t count, hetcclDataType_t datatype, int root,
                             hetcclComm_t comm, hetcclStream_t stream);
hetcclResult_t hetcclSend(const void* sendbuff, size_t count, hetcclDataType_t datatype, int peer, hetcclComm_t comm,
                          hetcclStream_t stream);
hetcclResult_t hetcclRecv(void* recvbuff, size_t count, hetcclDataType_t datatype, int peer, hetcclComm_t comm,
                          hetcclStream_t stream);

/* Device memory, copies and streams of a device kind ("cuda", "hip", "emu";
 * "host": plain memory, no streams), through the runtime hetccl loads
 * itself: for programs that link no vendor runtime (hetccl's tools and
 * tests; the emulated GPU, which only hetccl loads). The device is the
 * calling thread's current one of that kind. */
hetcclResult_t hetcclDeviceCount(const char* kind, int* count);
hetcclResult_t hetcclDeviceSet(const char* kind, int device);
hetcclResult_t hetcclDeviceAlloc(const char* kind, void** ptr, size_t bytes);
hetcclResult_t hetcclDeviceFree(const char* kind, void* ptr);
/* Synchronous, any direction. */
hetcclResult_t hetcclDeviceCopy(const char* kind, void* dst, const void* src, size_t bytes);
hetcclResult_t hetcclStreamCreate(const char* kind, hetcclStream_t* stream);
hetcclResult_t hetcclStreamDestroy(const char* kind, hetcclStream_t stream);
hetcclResult_t hetcclStreamSynchronize(const char* kind, hetcclStream_t stream);

/* Group calls: operations between Start and End are issued together at End;
 * send/recv pairs may be posted in any order without deadlock. Nestable. */
hetcclResult_t hetcclGroupStart(void);
hetcclResult_t hetcclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* HETCCL_HETCCL_H_ */
