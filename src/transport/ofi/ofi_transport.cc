#include "transport/ofi/ofi_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "secure/message_cipher.h"
#include "topology/peer.h"
#include "transport/ofi/ofi_ops.h"

namespace hetccl {

OfiTransport::OfiTransport(const TransportContext& ctx)
    : api_(ofi::loadOfiApi()), ctx_(ctx), sendSeq_(ctx.nranks, 0), recvSeq_(ctx.nranks, 0) {
  try {
    openEndpoint();
    exchangeAddresses();
  } catch (...) {
    close();
    throw;
  }
}

OfiTransport::~OfiTransport() { close(); }

void OfiTransport::openEndpoint() {
  auto check = [&](int rc, const char* what) {
    if (rc != 0)
      throwError(hetcclSystemError,
                 std::string("libfabric: ") + what + " failed on provider " + provider_ + ": " + api_.strerror(-rc));
  };
  // Where RMA writes are asked for (HETCCL_OFI_RMA_MIN), a provider that
  // also offers FI_RMA; else, or where none does, tagged messages only.
  fi_info* list = nullptr;
  if (settings::kOfiRmaMin.get() > 0) {
    try {
      list = ofi::findRdmProviders(api_, settings::kOfiProvider.get(), true);
      hasRma_ = true;
    } catch (const Error& e) {
      LOG_INFO(kTransport, "ofi: rank %d: %s; tagged messages only", ctx_.rank, e.what());
    }
  }
  if (!list) list = ofi::findRdmProviders(api_, settings::kOfiProvider.get());
  info_ = api_.dupinfo(ofi::preferredInfo(list));
  api_.freeinfo(list);
  if (!info_) throwError(hetcclSystemError, "libfabric: fi_dupinfo failed");
  provider_ = info_->fabric_attr->prov_name ? info_->fabric_attr->prov_name : "?";
  const uint64_t mr = info_->domain_attr->mr_mode;
  mrLocal_ = (mr & FI_MR_LOCAL) || settings::kOfiRegister.get();
  mrEndpoint_ = mr & FI_MR_ENDPOINT;
  mrProvKey_ = mr & FI_MR_PROV_KEY;
  mrVirtAddr_ = mr & FI_MR_VIRT_ADDR;
  // Encrypted parts grow by their records' framing: keep them within the provider's largest message.
  const size_t maxMsg = info_->ep_attr->max_msg_size;
  while (partBytes_ > 4096 && secure::MessageCipher::sealedBytes(partBytes_) > maxMsg) partBytes_ /= 2;
  if (secure::MessageCipher::sealedBytes(partBytes_) > maxMsg)
    throwError(hetcclSystemError, "libfabric: provider " + provider_ + " carries messages of at most " +
                                      std::to_string(maxMsg) + " bytes, too few for hetccl's parts");
  check(api_.fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  // A queue with a file descriptor where the provider has one: run() sleeps
  // in poll() on it once it has spun HETCCL_SPIN_US without progress,
  // leaving the cores to the ranks that share them. Else it only polls.
  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(domain_, &cqAttr, &cq_, nullptr) != 0 || fi_control(&cq_->fid, FI_GETWAIT, &waitFd_) != 0) {
    if (cq_) fi_close(&cq_->fid);
    cq_ = nullptr;
    waitFd_ = -1;
    cqAttr.wait_obj = FI_WAIT_NONE;
    check(fi_cq_open(domain_, &cqAttr, &cq_, nullptr), "fi_cq_open");
  }
  spinUs_ = static_cast<double>(settings::kSpinUs.get());
  fi_av_attr avAttr{};
  avAttr.type = info_->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_TABLE : info_->domain_attr->av_type;
  avAttr.count = static_cast<size_t>(ctx_.nranks);
  check(fi_av_open(domain_, &avAttr, &av_, nullptr), "fi_av_open");
  // A send completes once the peer's provider has the data
  // (FI_TRANSMIT_COMPLETE), not once it is buffered here: with manual
  // progress, data buffered by a rank that returns and closes its endpoint
  // would never leave. Providers that refuse it get their default.
  info_->tx_attr->op_flags |= FI_TRANSMIT_COMPLETE;
  if (fi_endpoint(domain_, info_, &ep_, nullptr) != 0) {
    info_->tx_attr->op_flags &= ~FI_TRANSMIT_COMPLETE;
    LOG_INFO(kTransport, "ofi: provider %s takes no FI_TRANSMIT_COMPLETE: sends complete as it defines",
             provider_.c_str());
    check(fi_endpoint(domain_, info_, &ep_, nullptr), "fi_endpoint");
  }
  check(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (completion queue)");
  check(fi_ep_bind(ep_, &av_->fid, 0), "fi_ep_bind (address vector)");
  check(fi_enable(ep_), "fi_enable");
}

void OfiTransport::exchangeAddresses() {
  const int n = ctx_.nranks;
  std::vector<uint8_t> name(256);
  size_t len = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(&ep_->fid, name.data(), &len);
  }
  if (rc != 0) throwError(hetcclSystemError, std::string("libfabric: fi_getname failed: ") + api_.strerror(-rc));
  // Lengths first, then the padded names; and what every rank must share:
  // the provider, and for peers on this host their pids (a dead one is
  // noticed before the timeout). A fresh nonce per rank keys its encrypted links.
  struct Who {
    uint64_t nameLen;
    uint64_t host;
    int64_t pid;
    char provider[48];
    std::array<uint8_t, 16> nonce;
    uint64_t rmaMin;  // HETCCL_OFI_RMA_MIN
    uint64_t hasRma;  // the provider offers FI_RMA
  };
  std::vector<Who> who(n, Who{});
  who[ctx_.rank].nameLen = len;
  who[ctx_.rank].host = localHostHash();
  who[ctx_.rank].pid = getpid();
  snprintf(who[ctx_.rank].provider, sizeof(who[ctx_.rank].provider), "%s", provider_.c_str());
  randomBytes(who[ctx_.rank].nonce.data(), who[ctx_.rank].nonce.size());
  const uint64_t rmaMin = settings::kOfiRmaMin.get();
  who[ctx_.rank].rmaMin = rmaMin;
  who[ctx_.rank].hasRma = hasRma_ ? 1 : 0;
  ctx_.bootstrap->allGather(who.data(), sizeof(Who));
  size_t maxLen = 0;
  int noRma = -1;  // a rank whose provider lacks FI_RMA
  for (int r = 0; r < n; ++r) {
    if (who[r].rmaMin != rmaMin)
      throwError(hetcclInvalidUsage, "ofi: HETCCL_OFI_RMA_MIN is " + std::to_string(who[r].rmaMin) + " on rank " +
                                         std::to_string(r) + " but " + std::to_string(rmaMin) + " on rank " +
                                         std::to_string(ctx_.rank) + " (set it alike on every rank)");
    if (!who[r].hasRma && noRma < 0) noRma = r;
    if (strncmp(who[r].provider, who[ctx_.rank].provider, sizeof(Who::provider)) != 0)
      throwError(hetcclInvalidUsage, "ofi: rank " + std::to_string(r) + " uses libfabric provider '" +
                                         std::string(who[r].provider, strnlen(who[r].provider, sizeof(Who::provider))) +
                                         "' but rank " + std::to_string(ctx_.rank) + " uses '" + provider_ +
                                         "' (set HETCCL_OFI_PROVIDER or FI_PROVIDER alike on every rank)");
    maxLen = std::max<size_t>(maxLen, who[r].nameLen);
  }
  if (maxLen > 4096) throwError(hetcclRemoteError, "ofi: an endpoint name of " + std::to_string(maxLen) + " bytes");
  std::vector<uint8_t> all(maxLen * n, 0);
  memcpy(all.data() + maxLen * ctx_.rank, name.data(), len);
  ctx_.bootstrap->allGather(all.data(), maxLen);
  addr_.assign(n, FI_ADDR_UNSPEC);
  for (int peer : ctx_.peers) {
    if (peer < 0 || peer >= n || peer == ctx_.rank) continue;
    rc = fi_av_insert(av_, all.data() + maxLen * peer, 1, &addr_[peer], 0, nullptr);
    if (rc != 1)
      throwError(hetcclSystemError, "libfabric: fi_av_insert of rank " + std::to_string(peer) + "'s address failed" +
                                        (rc < 0 ? std::string(": ") + api_.strerror(-rc) : std::string()));
  }
  localPid_.assign(n, 0);
  std::vector<std::array<uint8_t, 16>> nonces(n);
  for (int r = 0; r < n; ++r) {
    nonces[r] = who[r].nonce;
    if (r != ctx_.rank && who[r].host == who[ctx_.rank].host) localPid_[r] = static_cast<int>(who[r].pid);
  }
  setUpSealing(nonces);
  if (rmaMin > 0 && noRma >= 0)
    LOG_INFO(kTransport, "ofi: RMA writes off (HETCCL_OFI_RMA_MIN=%llu): rank %d's provider offers no FI_RMA",
             static_cast<unsigned long long>(rmaMin), noRma);
  rmaMin_ = noRma < 0 ? rmaMin : 0;
  if (rmaMin_) remoteMrs_ = std::make_unique<ofi::MrCache>(ofi::kRemoteMrs, ofi::softwareProvider(provider_));
  staging_.resize(ofi::kStagingSlots * secure::MessageCipher::sealedBytes(partBytes_));
  if (mrLocal_) {
    stagingMr_ = registerMemory(staging_.data(), staging_.size(), localAccess());
    if (!sendStaging_.empty()) sendStagingMr_ = registerMemory(sendStaging_.data(), sendStaging_.size(), localAccess());
  }
  ctx_.bootstrap->barrier();
  char where[128] = "?";
  size_t whereLen = sizeof(where);
  fi_av_straddr(av_, name.data(), where, &whereLen);
  size_t nSealed = 0;
  for (const auto& c : sealTo_) nSealed += c ? 1 : 0;
  LOG_INFO(kTransport,
           "ofi transport: rank %d at %s, %zu peers (%zu encrypted), provider %s (fabric %s, domain %s), libfabric "
           "%u.%u, parts of %zu bytes, %s, registration %s%s, RMA writes %s",
           ctx_.rank, where, ctx_.peers.size(), nSealed, provider_.c_str(),
           info_->fabric_attr->name ? info_->fabric_attr->name : "?",
           info_->domain_attr->name ? info_->domain_attr->name : "?", FI_MAJOR(api_.version), FI_MINOR(api_.version),
           partBytes_, waitFd_ >= 0 ? "waits in poll() after spinning" : "waits by polling (no wait descriptor)",
           !mrLocal_                                     ? "not needed"
           : (info_->domain_attr->mr_mode & FI_MR_LOCAL) ? "of every buffer (FI_MR_LOCAL)"
                                                         : "of every buffer (HETCCL_OFI_REGISTER)",
           mrEndpoint_ ? ", on the endpoint" : "",
           rmaMin_
               ? ("from " + std::to_string(rmaMin_) + " bytes" + (mrVirtAddr_ ? " (virtual addresses)" : " (offsets)"))
                     .c_str()
               : "never");
}

uint64_t OfiTransport::localAccess() const { return FI_SEND | FI_RECV | (rmaMin_ ? FI_WRITE : 0); }

fid_mr* OfiTransport::registerMemory(const void* p, size_t n, uint64_t access) {
  fid_mr* mr = nullptr;
  const uint64_t key = mrProvKey_ ? 0 : nextKey_++;
  int rc = fi_mr_reg(domain_, p, n, access, 0, key, 0, &mr, nullptr);
  if (rc == 0 && mrEndpoint_) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) fi_close(&mr->fid);
  }
  if (rc != 0)
    throwError(hetcclSystemError, "libfabric: registering " + std::to_string(n) + " bytes at " +
                                      std::to_string(reinterpret_cast<uintptr_t>(p)) + " with provider " + provider_ +
                                      " failed: " + api_.strerror(-rc));
  return mr;
}

void* OfiTransport::descFor(Run& r, const void* p, size_t n) {
  if (!mrLocal_) return nullptr;
  const auto b = reinterpret_cast<uintptr_t>(p);
  if (b >= reinterpret_cast<uintptr_t>(staging_.data()) &&
      b + n <= reinterpret_cast<uintptr_t>(staging_.data()) + staging_.size())
    return fi_mr_desc(stagingMr_);
  if (sendStagingMr_ && b >= reinterpret_cast<uintptr_t>(sendStaging_.data()) &&
      b + n <= reinterpret_cast<uintptr_t>(sendStaging_.data()) + sendStaging_.size())
    return fi_mr_desc(sendStagingMr_);
  for (auto& [range, mr] : r.regs)
    if (range.first <= b && b + n <= range.second) return fi_mr_desc(mr);
  fid_mr* mr = registerMemory(p, n, localAccess());
  r.regs.push_back({{b, b + n}, mr});
  return fi_mr_desc(mr);
}

void OfiTransport::close() {
  // Endpoint first (it holds the others), then what it was bound to.
  auto closeFid = [](auto*& obj) {
    if (obj) fi_close(&obj->fid);
    obj = nullptr;
  };
  if (rmaMin_)
    LOG_INFO(kTransport,
             "ofi transport: rank %d wrote %llu messages by RMA, received %llu by RMA (%llu registrations), "
             "took %llu folds as tagged parts",
             ctx_.rank, static_cast<unsigned long long>(rmaWritten_), static_cast<unsigned long long>(rmaReceived_),
             static_cast<unsigned long long>(remoteMrs_ ? remoteMrs_->registrations() : 0),
             static_cast<unsigned long long>(rmaParts_));
  rmaMin_ = 0;
  closeFid(ep_);
  remoteMrs_.reset();
  closeFid(stagingMr_);
  closeFid(sendStagingMr_);
  closeFid(av_);
  closeFid(cq_);
  closeFid(domain_);
  closeFid(fabric_);
  if (info_) api_.freeinfo(info_);
  info_ = nullptr;
}

}  // namespace hetccl
