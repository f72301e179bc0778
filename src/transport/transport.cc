#include "transport/transport.h"

#include <dirent.h>

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "transport/net/net_transport.h"
#include "transport/progress.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#if HETCCL_HAVE_UCX
#include "transport/ucx/ucx_transport.h"
#endif
#if HETCCL_HAVE_OFI
#include "transport/ofi/ofi_transport.h"
#endif

namespace hetccl {

Xfer Xfer::send(int peer, const void* src, size_t bytes, const MsgTag& t) {
  Xfer x;
  x.kind = Kind::kSend;
  x.peer = peer;
  x.src = src;
  x.bytes = bytes;
  x.tag = t;
  x.tag.bytes = bytes;
  return x;
}

Xfer Xfer::recv(int peer, void* dst, size_t bytes, const MsgTag& t) {
  Xfer x;
  x.kind = Kind::kRecv;
  x.peer = peer;
  x.dst = dst;
  x.bytes = bytes;
  x.tag = t;
  x.tag.bytes = bytes;
  return x;
}

Xfer Xfer::recvReduce(int peer, void* dst, size_t bytes, DataType dt, RedKind k, const MsgTag& t, const void* operand) {
  Xfer x = recv(peer, dst, bytes, t);
  x.kind = Kind::kRecvReduce;
  x.src = operand;
  x.dtype = dt;
  x.redKind = k;
  return x;
}

bool processAlive(int pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char buf[256] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  const char* close = strrchr(buf, ')');  // "pid (comm) S ..."
  if (n == 0 || !close || close[1] == 0) return true;
  return close[2] != 'Z' && close[2] != 'X';
}

bool ucxRdmaAvailable() {
#if HETCCL_HAVE_UCX
  DIR* d = opendir("/sys/class/infiniband");
  if (!d) return false;
  bool any = false;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') any = true;
  closedir(d);
  if (!any) return false;
  try {
    ucx::loadUcxApi();
    return true;
  } catch (const Error&) {
    return false;
  }
#else
  return false;
#endif
}

std::string ofiHardwareProvider() {
#if HETCCL_HAVE_OFI
  return ofi::hardwareRdmProvider();
#else
  return "";
#endif
}

// The transports this build has: ucx and ofi need their headers at build
// time (their libraries are loaded at run time); net loads a plugin.
std::vector<std::string> transportNames() {
  std::vector<std::string> names{"tcp", "shm"};
#if HETCCL_HAVE_UCX
  names.push_back("ucx");
#endif
#if HETCCL_HAVE_OFI
  names.push_back("ofi");
#endif
  names.push_back("net");
  return names;
}

std::unique_ptr<Transport> createTransport(const std::string& name, const TransportContext& ctx) {
  if (name == "tcp") return std::make_unique<TcpTransport>(ctx);
  if (name == "shm") return std::make_unique<ShmTransport>(ctx);
  if (name == "ucx") {
#if HETCCL_HAVE_UCX
    return std::make_unique<UcxTransport>(ctx);
#else
    throwError(hetcclInvalidUsage, "transport ucx: this hetccl was built without UCX's headers (libucx-dev)");
#endif
  }
  if (name == "ofi") {
#if HETCCL_HAVE_OFI
    return std::make_unique<OfiTransport>(ctx);
#else
    throwError(hetcclInvalidUsage, "transport ofi: this hetccl was built without libfabric's headers (libfabric-dev)");
#endif
  }
  if (name == "net") return std::make_unique<NetTransport>(ctx);
  std::string known;
  for (const std::string& n : transportNames()) known += (known.empty() ? "" : ", ") + n;
  throwError(hetcclInvalidArgument, "unknown transport '" + name + "' (this build has: " + known + ")");
}

}  // namespace hetccl
