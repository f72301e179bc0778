#include "transport/net/net_transport.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/workers.h"
#include "secure/message_cipher.h"
#include "topology/peer.h"
#include "transport/net/net_abi.h"
#include "transport/sealed_links.h"

namespace hetccl {
namespace {

constexpr size_t kMinPart = size_t{64} << 10;
constexpr size_t kMaxPart = size_t{4} << 20;

// What every rank tells the others at init.
struct Who {
  uint64_t host;
  int64_t pid;
  uint64_t partBytes;
  std::array<uint8_t, 16> nonce;
};

}  // namespace

NetTransport::NetTransport(const TransportContext& ctx)
    : ctx_(ctx), plugin_(NetPlugin::load()), index_(static_cast<size_t>(ctx.nranks), -1) {
  pluginCtx_ = plugin_->openContext(ctx.bootstrap->id().jobId);
  try {
    const int ndev = plugin_->devices();
    if (ndev <= 0)
      throwError(hetcclSystemError, "net plugin '" + plugin_->name() + "' (" + plugin_->file() + ") has " +
                                        std::to_string(ndev) + " devices");
    dev_ = ctx.rank % ndev;
    props_ = plugin_->properties(dev_);
    if (!(props_.ptrSupport & netabi::kPtrHost))
      throwError(hetcclInvalidUsage, "net plugin '" + plugin_->name() + "' device " + std::to_string(dev_) + " (" +
                                         props_.name + ") cannot move host memory (ptrSupport " +
                                         std::to_string(props_.ptrSupport) + ")");
    // Parts: a quarter of HETCCL_BUFFSIZE, 64 KiB to 4 MiB, within the
    // plugin's largest transfer once sealed, a multiple of 64 bytes (whole
    // elements of every type).
    size_t part = std::clamp(ctx.buffBytes / kSlots, kMinPart, kMaxPart);
    const size_t limit = props_.maxP2pBytes ? props_.maxP2pBytes : kMaxPart;
    while (part > 4096 && secure::MessageCipher::sealedBytes(part) > limit) part /= 2;
    partBytes_ = part & ~size_t{63};
    slotBytes_ = (secure::MessageCipher::sealedBytes(partBytes_) + 4095) & ~size_t{4095};

    std::vector<Who> who(static_cast<size_t>(ctx.nranks));
    who[ctx.rank] = {localHostHash(), static_cast<int64_t>(getpid()), partBytes_, {}};
    randomBytes(who[ctx.rank].nonce.data(), who[ctx.rank].nonce.size());
    ctx.bootstrap->allGather(who.data(), sizeof(Who));
    for (int r = 0; r < ctx.nranks; ++r)
      if (who[r].partBytes != partBytes_)
        throwError(hetcclInvalidUsage, "net: rank " + std::to_string(r) + " cuts messages into parts of " +
                                           std::to_string(who[r].partBytes) + " bytes but rank " +
                                           std::to_string(ctx.rank) + " into " + std::to_string(partBytes_) +
                                           " (HETCCL_BUFFSIZE and the plugin's devices must agree)");

    for (int p : ctx.peers) {
      if (p < 0 || p >= ctx.nranks || p == ctx.rank || index_[p] >= 0) continue;
      index_[p] = static_cast<int>(peers_.size());
      Peer& peer = peers_.emplace_back();
      peer.rank = p;
      if (who[p].host == who[ctx.rank].host) peer.pid = static_cast<int>(who[p].pid);
    }
    // A listen handle per peer: rank r's block holds, at [p], the handle rank p connects to.
    std::vector<uint8_t> handles(static_cast<size_t>(ctx.nranks) * ctx.nranks * netabi::kHandleBytes, 0);
    const size_t block = static_cast<size_t>(ctx.nranks) * netabi::kHandleBytes;
    for (Peer& p : peers_)
      p.listenComm = plugin_->listen(
          pluginCtx_, dev_, handles.data() + block * ctx.rank + static_cast<size_t>(p.rank) * netabi::kHandleBytes);
    ctx.bootstrap->allGather(handles.data(), block);
    connectAll(handles);

    const bool anySealed = std::any_of(peers_.begin(), peers_.end(), [&](const Peer& p) {
      return static_cast<size_t>(p.rank) < ctx.encrypt.size() && ctx.encrypt[p.rank];
    });
    if (anySealed) threads_ = hostThreadsFor(ctx.localRanks);
    const uint64_t perKey = sealedMessagesPerKey(ctx.rekeyRecords, partBytes_);
    for (Peer& p : peers_) {
      setUp(p);
      if (static_cast<size_t>(p.rank) >= ctx.encrypt.size() || !ctx.encrypt[p.rank]) continue;
      const int lo = std::min(ctx.rank, p.rank), hi = std::max(ctx.rank, p.rank);
      SealedLink l = makeSealedLink(ctx, p.rank, who[lo].nonce, who[hi].nonce, "net transport", perKey);
      p.sealTo = std::move(l.sealTo);
      p.openFrom = std::move(l.openFrom);
    }
    ctx.bootstrap->barrier();
    LOG_INFO(kTransport,
             "net: rank %d connected to %zu peers through plugin '%s' v%d, device %d (%s, %d Mbit/s%s), parts of %zu "
             "bytes%s",
             ctx.rank, peers_.size(), plugin_->name().c_str(), plugin_->version(), dev_, props_.name.c_str(),
             props_.speedMbps, props_.forceFlush ? ", flushed receives" : "", partBytes_,
             anySealed ? ", encrypted links" : "");
  } catch (...) {
    closeAll();
    throw;
  }
}

NetTransport::~NetTransport() { closeAll(); }

void NetTransport::connectAll(const std::vector<uint8_t>& handles) {
  const size_t block = static_cast<size_t>(ctx_.nranks) * netabi::kHandleBytes;
  const double t0 = clockUs();
  for (;;) {
    bool all = true, progress = false;
    for (Peer& p : peers_) {
      if (!p.sendComm) {
        // The handle rank p listened with for this rank.
        auto* h = const_cast<uint8_t*>(handles.data() + block * p.rank +
                                       static_cast<size_t>(ctx_.rank) * netabi::kHandleBytes);
        p.sendComm = plugin_->connect(pluginCtx_, dev_, h);
        progress |= p.sendComm != nullptr;
      }
      if (!p.recvComm) {
        p.recvComm = plugin_->accept(p.listenComm);
        progress |= p.recvComm != nullptr;
      }
      all &= p.sendComm && p.recvComm;
    }
    if (all) break;
    if (ctx_.abort && ctx_.abort->load(std::memory_order_relaxed))
      throwError(hetcclRemoteError, "net: communicator aborted while connecting");
    if ((clockUs() - t0) * 1e-6 > ctx_.timeoutS) {
      std::string missing;
      for (const Peer& p : peers_)
        if (!p.sendComm || !p.recvComm)
          missing += (missing.empty() ? "" : ", ") + std::to_string(p.rank) + (p.sendComm ? " (accept)" : " (connect)");
      throwError(hetcclRemoteError, "net: not connected within " + std::to_string(static_cast<int>(ctx_.timeoutS)) +
                                        " s to rank(s) " + missing + " through plugin '" + plugin_->name() + "'");
    }
    if (!progress) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (Peer& p : peers_) {
    plugin_->closeListen(p.listenComm);
    p.listenComm = nullptr;
  }
}

void NetTransport::setUp(Peer& p) {
  const size_t bytes = static_cast<size_t>(kSlots) * slotBytes_;
  for (Staging* s : {&p.send, &p.recv}) {
    s->mem = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
    if (!s->mem) throwError(hetcclSystemError, "net: cannot allocate " + std::to_string(bytes) + " bytes of staging");
    memset(s->mem, 0, bytes);
    s->mr = plugin_->regMr(s == &p.send ? p.sendComm : p.recvComm, s->mem, bytes);
  }
}

void NetTransport::closeAll() {
  for (Peer& p : peers_) {
    if (p.send.mr) plugin_->deregMr(p.sendComm, p.send.mr);
    if (p.recv.mr) plugin_->deregMr(p.recvComm, p.recv.mr);
    p.send.mr = p.recv.mr = nullptr;
    if (p.sendComm) plugin_->closeSend(p.sendComm);
    if (p.recvComm) plugin_->closeRecv(p.recvComm);
    if (p.listenComm) plugin_->closeListen(p.listenComm);
    p.sendComm = p.recvComm = p.listenComm = nullptr;
    free(p.send.mem);
    free(p.recv.mem);
    p.send.mem = p.recv.mem = nullptr;
  }
  if (pluginCtx_) plugin_->closeContext(pluginCtx_);
  pluginCtx_ = nullptr;
}

void NetTransport::poison(const std::string& why) {
  std::lock_guard<std::mutex> lock(poisonMu_);
  if (poisoned_.load()) return;
  poisonWhy_ = why;
  poisoned_.store(true, std::memory_order_release);
}

NetTransport::Peer& NetTransport::peer(int rank) {
  if (rank < 0 || rank >= ctx_.nranks || index_[rank] < 0)
    throwError(hetcclInternalError, "net: no connection to rank " + std::to_string(rank));
  return peers_[static_cast<size_t>(index_[rank])];
}

size_t NetTransport::wireBytes(const Peer& p, size_t plain) const {
  return p.sealTo ? secure::MessageCipher::sealedBytes(plain) : plain;
}

}  // namespace hetccl
