// The C ABI of NCCL's network plugins (libnccl-net-<name>.so exporting
// ncclNetPlugin_vN), as far as the net transport uses it: versions 8 to 12.
// Written from what NCCL's public plugin headers (net_v8.h .. net_v12.h)
// state about each version: the order and types of the table's entries and
// of the properties a plugin fills. Entries hetccl never calls (device
// offload, virtual NICs, attributes) keep their place as untyped pointers.
//
// What changed between versions, as used here:
//   v8  init(logger); connect(dev, handle, ..); isend and irecv take int sizes.
//   v9  sizes become size_t; properties gain forceFlush, virtual-NIC devices
//       and the largest transfer (maxP2pBytes).
//   v10 init also takes a profiler callback; connect takes a comm config;
//       isend and irecv take profiler handles.
//   v11 init returns a context per communicator (listen and connect take
//       it; finalize ends it); properties gain maxMultiRequestSize.
//   v12 (NCCL 2.30) the same table; a virtual NIC holds up to 8 devices (not
//       4), and properties end with the device's rail and plane (int16_t).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetccl::netabi {

// ncclResult_t's values.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};
const char* resultName(int r);

constexpr size_t kHandleBytes = 128;  // the most a listen handle holds
constexpr int kPtrHost = 0x1;         // regMr's memory type: host memory
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmaBuf = 0x4;
constexpr int kMaxDevsPerNic = 4;  // v9 to v11
constexpr int kMaxDevsPerNicV12 = 8;
constexpr int kTrafficClassUndef = -1;
// Log levels a plugin passes to the logger.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };

extern "C" {
typedef void (*Logger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
typedef int (*ProfilerCallback)(void** eventHandle, int type, void* parentHandle, int64_t pluginId, void* extra);

struct VDeviceProps {
  int ndevs;
  int devs[kMaxDevsPerNic];
};

struct VDevicePropsV12 {
  int ndevs;
  int devs[kMaxDevsPerNicV12];
};

struct CommConfig {  // v10 to v12
  int trafficClass;
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

struct PropertiesV9 {  // v10 alike
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};

struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

struct PropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

struct NetV8 {
  const char* name;
  int (*init)(Logger log);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, PropertiesV8* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm, void** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  void* getDeviceMr;
  void* irecvConsumed;
};

struct NetV9 {
  const char* name;
  int (*init)(Logger log);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, PropertiesV9* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, void* handle, void** sendComm, void** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
};

struct NetV10 {
  const char* name;
  int (*init)(Logger log, ProfilerCallback prof);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, PropertiesV9* props);
  int (*listen)(int dev, void* handle, void** listenComm);
  int (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, void** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
};

struct NetV11 {
  const char* name;
  int (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger log, ProfilerCallback prof);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, PropertiesV11* props);
  int (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  int (*connect)(void* ctx, int dev, void* handle, void** sendComm, void** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
  int (*finalize)(void* ctx);
  void* setNetAttr;
};

struct NetV12 {  // NetV11 but for the properties
  const char* name;
  int (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger log, ProfilerCallback prof);
  int (*devices)(int* ndev);
  int (*getProperties)(int dev, PropertiesV12* props);
  int (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  int (*connect)(void* ctx, int dev, void* handle, void** sendComm, void** sendDevComm);
  int (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  int (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  int (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  int (*deregMr)(void* comm, void* mhandle);
  int (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  int (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
               void** request);
  int (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  int (*test)(void* request, int* done, int* sizes);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  void* getDeviceMr;
  void* irecvConsumed;
  void* makeVDevice;
  int (*finalize)(void* ctx);
  void* setNetAttr;
};
}  // extern "C"

}  // namespace hetccl::netabi
