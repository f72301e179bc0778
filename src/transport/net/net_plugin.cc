#include "transport/net/net_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <type_traits>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "transport/net/net_abi.h"

namespace hetccl {

const char* netabi::resultName(int r) {
  switch (r) {
    case kSuccess: return "ncclSuccess";
    case kUnhandledCudaError: return "ncclUnhandledCudaError";
    case kSystemError: return "ncclSystemError";
    case kInternalError: return "ncclInternalError";
    case kInvalidArgument: return "ncclInvalidArgument";
    case kInvalidUsage: return "ncclInvalidUsage";
    case kRemoteError: return "ncclRemoteError";
    case kInProgress: return "ncclInProgress";
    default: return "an unknown result";
  }
}

namespace {

// What a plugin logs goes to hetccl's logger (subsystem TRANSPORT).
extern "C" void pluginLog(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  LogLevel l = level == netabi::kLogWarn || level == netabi::kLogAbort ? LogLevel::kWarn
               : level == netabi::kLogInfo                             ? LogLevel::kInfo
               : level == netabi::kLogTrace                            ? LogLevel::kTrace
                                                                       : LogLevel::kNone;
  if (l == LogLevel::kNone || !logEnabled(l, kTransport)) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt ? fmt : "", ap);
  va_end(ap);
  logMessage(l, kTransport, "net plugin %s:%d: %s", file ? file : "?", line, text);
}

// hetccl records no plugin events: every event handle is null.
extern "C" int pluginProfile(void** eventHandle, int, void*, int64_t, void*) {
  if (eventHandle) *eventHandle = nullptr;
  return netabi::kSuccess;
}

// Largest size an int-sized ABI (v8) can carry.
constexpr size_t kIntMax = static_cast<size_t>(INT_MAX);

template <int V>
struct TableOf;
template <>
struct TableOf<8> {
  using T = netabi::NetV8;
  using Props = netabi::PropertiesV8;
};
template <>
struct TableOf<9> {
  using T = netabi::NetV9;
  using Props = netabi::PropertiesV9;
};
template <>
struct TableOf<10> {
  using T = netabi::NetV10;
  using Props = netabi::PropertiesV9;
};
template <>
struct TableOf<11> {
  using T = netabi::NetV11;
  using Props = netabi::PropertiesV11;
};

template <>
struct TableOf<12> {
  using T = netabi::NetV12;
  using Props = netabi::PropertiesV12;
};

template <int V>
class VersionedPlugin : public NetPlugin {
  using Table = typename TableOf<V>::T;
  using Props = typename TableOf<V>::Props;

 public:
  VersionedPlugin(const Table* t, std::string file) : t_(t) {
    file_ = std::move(file);
    name_ = t->name ? t->name : "(unnamed)";
    if constexpr (V < 11) {  // one init per process; v11 inits per communicator (openContext)
      if (!t_->init) failCall("init", netabi::kInternalError, "the table has no init", false);
      int r;
      if constexpr (V == 10)
        r = t_->init(pluginLog, pluginProfile);
      else
        r = t_->init(pluginLog);
      if (r != netabi::kSuccess) failCall("init", r, "loading the plugin", false);
    }
  }
  int version() const override { return V; }

  void* openContext(uint64_t commId) override {
    if constexpr (V >= 11) {
      netabi::CommConfig cfg{netabi::kTrafficClassUndef};
      void* ctx = nullptr;
      int r = t_->init(&ctx, commId, &cfg, pluginLog, pluginProfile);
      if (r != netabi::kSuccess) failCall("init", r, "a communicator's context", false);
      return ctx;
    } else {
      (void)commId;
      return nullptr;
    }
  }
  void closeContext(void* ctx) override {
    if constexpr (V >= 11) {
      if (t_->finalize) warnIf("finalize", t_->finalize(ctx));
    } else {
      (void)ctx;
    }
  }

  int devices() override {
    int n = 0;
    int r = t_->devices(&n);
    if (r != netabi::kSuccess) failCall("devices", r, "counting its devices", false);
    return n;
  }

  NetDeviceProps properties(int dev) override {
    // Room past the struct: a plugin built against a later minor layout
    // must not write over the stack.
    union {
      Props p;
      char room[1024];
    } u{};
    int r = t_->getProperties(dev, &u.p);
    if (r != netabi::kSuccess) failCall("getProperties", r, "device " + std::to_string(dev), false);
    NetDeviceProps out;
    out.name = u.p.name ? u.p.name : "";
    out.ptrSupport = u.p.ptrSupport;
    out.speedMbps = u.p.speed;
    if constexpr (V >= 9) {
      out.forceFlush = u.p.forceFlush != 0;
      out.maxP2pBytes = u.p.maxP2pBytes;
    } else {
      out.maxP2pBytes = kIntMax;
    }
    if constexpr (V >= 12)
      LOG_INFO(kTransport, "net plugin '%s': device %d (%s) is on rail %d, plane %d", name_.c_str(), dev,
               out.name.c_str(), u.p.railId, u.p.planeId);
    return out;
  }

  void* listen(void* ctx, int dev, void* handle) override {
    void* lc = nullptr;
    int r;
    if constexpr (V >= 11)
      r = t_->listen(ctx, dev, handle, &lc);
    else
      (void)ctx, r = t_->listen(dev, handle, &lc);
    if (r != netabi::kSuccess) failCall("listen", r, "device " + std::to_string(dev), false);
    if (!lc) failCall("listen", netabi::kInternalError, "it returned no listen comm", false);
    return lc;
  }

  void* connect(void* ctx, int dev, void* handle) override {
    void* sc = nullptr;
    void* devComm = nullptr;  // no device offload asked for
    int r;
    if constexpr (V >= 11) {
      r = t_->connect(ctx, dev, handle, &sc, &devComm);
    } else if constexpr (V == 10) {
      (void)ctx;
      netabi::CommConfig cfg{netabi::kTrafficClassUndef};
      r = t_->connect(dev, &cfg, handle, &sc, &devComm);
    } else {
      (void)ctx;
      r = t_->connect(dev, handle, &sc, &devComm);
    }
    if (r != netabi::kSuccess) failCall("connect", r, "device " + std::to_string(dev), false);
    return sc;
  }

  void* accept(void* listenComm) override {
    void* rc = nullptr;
    void* devComm = nullptr;
    int r = t_->accept(listenComm, &rc, &devComm);
    if (r != netabi::kSuccess) failCall("accept", r, "a peer's connection", false);
    return rc;
  }

  void* regMr(void* comm, void* data, size_t size) override {
    void* mh = nullptr;
    int r = t_->regMr(comm, data, size, netabi::kPtrHost, &mh);
    if (r != netabi::kSuccess) failCall("regMr", r, std::to_string(size) + " bytes of host memory", false);
    return mh;
  }

  int isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    *request = nullptr;
    if constexpr (V == 8)
      return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    else if constexpr (V == 9)
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    else
      return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
  }

  int irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    *request = nullptr;
    if constexpr (V == 8) {
      int sz = static_cast<int>(size);
      return t_->irecv(recvComm, 1, &data, &sz, &tag, &mhandle, request);
    } else if constexpr (V == 9) {
      return t_->irecv(recvComm, 1, &data, &size, &tag, &mhandle, request);
    } else {
      void* ph = nullptr;
      return t_->irecv(recvComm, 1, &data, &size, &tag, &mhandle, &ph, request);
    }
  }

  int iflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) override {
    *request = nullptr;
    int sz = static_cast<int>(size);
    return t_->iflush(recvComm, 1, &data, &sz, &mhandle, request);
  }

  int test(void* request, bool* done, size_t* bytes) override {
    int d = 0, sz = 0;
    int r = t_->test(request, &d, &sz);
    *done = r == netabi::kSuccess && d != 0;
    *bytes = sz < 0 ? 0 : static_cast<size_t>(sz);
    return r;
  }

  void deregMr(void* comm, void* mhandle) override { warnIf("deregMr", t_->deregMr(comm, mhandle)); }
  void closeSend(void* comm) override { warnIf("closeSend", t_->closeSend(comm)); }
  void closeRecv(void* comm) override { warnIf("closeRecv", t_->closeRecv(comm)); }
  void closeListen(void* comm) override { warnIf("closeListen", t_->closeListen(comm)); }

 private:
  const Table* t_;
};

constexpr int kKnown[] = {12, 11, 10, 9, 8};  // newest first

std::shared_ptr<NetPlugin> make(int v, const void* table, const std::string& file) {
  switch (v) {
    case 8: return std::make_shared<VersionedPlugin<8>>(static_cast<const netabi::NetV8*>(table), file);
    case 9: return std::make_shared<VersionedPlugin<9>>(static_cast<const netabi::NetV9*>(table), file);
    case 10: return std::make_shared<VersionedPlugin<10>>(static_cast<const netabi::NetV10*>(table), file);
    case 11: return std::make_shared<VersionedPlugin<11>>(static_cast<const netabi::NetV11*>(table), file);
    default: return std::make_shared<VersionedPlugin<12>>(static_cast<const netabi::NetV12*>(table), file);
  }
}

// The entries a version's table must hold for the transport to run.
bool complete(int v, const void* table) {
  auto has = [](const auto* t) {
    return t->init && t->devices && t->getProperties && t->listen && t->connect && t->accept && t->regMr &&
           t->deregMr && t->isend && t->irecv && t->iflush && t->test && t->closeSend && t->closeRecv && t->closeListen;
  };
  switch (v) {
    case 8: return has(static_cast<const netabi::NetV8*>(table));
    case 9: return has(static_cast<const netabi::NetV9*>(table));
    case 10: return has(static_cast<const netabi::NetV10*>(table));
    case 11: return has(static_cast<const netabi::NetV11*>(table));
    default: return has(static_cast<const netabi::NetV12*>(table));
  }
}

}  // namespace

std::string NetPlugin::fileFor(const std::string& setting) {
  if (setting.empty()) return "libnccl-net.so";
  if (setting.find('/') != std::string::npos || setting.find(".so") != std::string::npos) return setting;
  return "libnccl-net-" + setting + ".so";
}

std::shared_ptr<NetPlugin> NetPlugin::load() {
  const std::string setting = settings::kNetPlugin.get();
  const std::string file = fileFor(setting);
  const int cap = static_cast<int>(settings::kNetPluginAbi.get());
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<NetPlugin>> loaded;  // by file and version cap
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = file + "#" + std::to_string(cap);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;

  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    const std::string from = setting.empty() ? "neither HETCCL_NET_PLUGIN nor NCCL_NET_PLUGIN is set"
                                             : "HETCCL_NET_PLUGIN, else NCCL_NET_PLUGIN, is '" + setting + "'";
    throwError(hetcclInvalidUsage, "net transport: cannot load the net plugin '" + file + "' (" + from +
                                       "): " + (why ? why : "dlopen failed") +
                                       "; set HETCCL_NET_PLUGIN (or NCCL_NET_PLUGIN) to a plugin's path or name");
  }
  // Every ncclNetPlugin_v* symbol is looked up by name (1 to 99), for the
  // choice and for the error that lists what the library has.
  std::string found;
  int picked = 0;
  const void* table = nullptr;
  for (int v = 99; v >= 1; --v) {
    const std::string sym = "ncclNetPlugin_v" + std::to_string(v);
    const void* t = dlsym(lib, sym.c_str());
    if (!t) continue;
    found += (found.empty() ? "" : ", ") + sym;
    const bool known = std::find(std::begin(kKnown), std::end(kKnown), v) != std::end(kKnown);
    if (!picked && known && (cap == 0 || v <= cap)) picked = v, table = t;
  }
  if (!picked) {
    dlclose(lib);
    throwError(hetcclInvalidUsage,
               "net transport: the net plugin '" + file + "' exports no ABI version hetccl knows" +
                   (cap ? " at or below HETCCL_NET_PLUGIN_ABI=" + std::to_string(cap) : std::string()) + " (it has " +
                   (found.empty() ? std::string("no ncclNetPlugin_v* symbol") : found) +
                   "; hetccl knows ncclNetPlugin_v8, _v9, _v10, _v11 and _v12)");
  }
  if (!complete(picked, table)) {
    dlclose(lib);
    throwError(hetcclInvalidUsage, "net transport: the net plugin '" + file + "' has ncclNetPlugin_v" +
                                       std::to_string(picked) + " with entries the transport needs left null");
  }
  auto p = make(picked, table, file);  // the library stays loaded for the process's life
  LOG_INFO(kTransport, "net: plugin '%s' from %s, ABI v%d (exports %s)", p->name().c_str(), file.c_str(), picked,
           found.c_str());
  loaded[key] = p;
  return p;
}

void NetPlugin::failCall(const char* call, int r, const std::string& what, bool dataPath) const {
  const hetcclResult_t code = r == netabi::kRemoteError || dataPath ? hetcclRemoteError : hetcclSystemError;
  throwError(code, "net plugin '" + name_ + "' (" + file_ + "): " + call + " failed with " + netabi::resultName(r) +
                       " (" + std::to_string(r) + ") on " + what);
}

void NetPlugin::warnIf(const char* call, int r) const {
  if (r != netabi::kSuccess)
    LOG_WARN(kTransport, "net plugin '%s' (%s): %s failed with %s (%d) at teardown", name_.c_str(), file_.c_str(), call,
             netabi::resultName(r), r);
}

}  // namespace hetccl
