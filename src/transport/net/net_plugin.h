// An NCCL network plugin loaded for the net transport: the library found
// from HETCCL_NET_PLUGIN (else NCCL_NET_PLUGIN; a path, or a name X for
// libnccl-net-X.so), the newest ABI version it exports among those of
// net_abi.h (HETCCL_NET_PLUGIN_ABI caps it), and one C++ face over the
// versions' tables. Every call's failure throws an error naming the call,
// the plugin and what it was for.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace hetccl {

struct NetDeviceProps {
  std::string name;
  int ptrSupport = 0;       // netabi::kPtr* bits
  bool forceFlush = false;  // receives must be flushed before their data is read (v9 and up)
  size_t maxP2pBytes = 0;   // the largest isend/irecv; 0: the ABI has no limit field
  int speedMbps = 0;
};

class NetPlugin {
 public:
  // The plugin HETCCL_NET_PLUGIN names, loaded and initialised once per
  // process (per version picked). Throws InvalidUsage where the library
  // cannot be loaded or exports no version hetccl knows (naming the file
  // and the ncclNetPlugin_v* symbols it has), SystemError where its init fails.
  static std::shared_ptr<NetPlugin> load();
  // The file to load for a setting's value: a path or file name as given,
  // a bare name X as libnccl-net-X.so; empty: libnccl-net.so.
  static std::string fileFor(const std::string& setting);

  virtual ~NetPlugin() = default;
  virtual int version() const = 0;
  const std::string& name() const { return name_; }
  const std::string& file() const { return file_; }

  // Per communicator (v11: the plugin's context; before: nothing).
  virtual void* openContext(uint64_t commId) = 0;
  virtual void closeContext(void* ctx) = 0;

  virtual int devices() = 0;
  virtual NetDeviceProps properties(int dev) = 0;
  // handle: netabi::kHandleBytes bytes, filled for the peer to connect with.
  virtual void* listen(void* ctx, int dev, void* handle) = 0;
  // Not yet connected: null (call again).
  virtual void* connect(void* ctx, int dev, void* handle) = 0;
  virtual void* accept(void* listenComm) = 0;
  virtual void* regMr(void* comm, void* data, size_t size) = 0;  // host memory
  // The data path returns the plugin's result (netabi::Result; failCall
  // turns a failure into an error), so that the caller names its context
  // only when one fails.
  // isend/irecv: *request null where the plugin cannot take it now (call
  // again). iflush: null where nothing needs flushing. test: *bytes moved
  // once *done.
  virtual int isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual int irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  virtual int iflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) = 0;
  virtual int test(void* request, bool* done, size_t* bytes) = 0;
  // Throws for a failed call: "net plugin 'N' (file): call failed with R
  // (code) on what". RemoteError where the plugin says the peer failed or
  // the call moves data (`what` names the peer), else SystemError.
  [[noreturn]] void failCall(const char* call, int r, const std::string& what, bool dataPath) const;
  // Teardown: a failure is logged, not thrown.
  virtual void deregMr(void* comm, void* mhandle) = 0;
  virtual void closeSend(void* comm) = 0;
  virtual void closeRecv(void* comm) = 0;
  virtual void closeListen(void* comm) = 0;

 protected:
  // Teardown calls: logs a failure.
  void warnIf(const char* call, int r) const;

  std::string name_;
  std::string file_;
};

}  // namespace hetccl
