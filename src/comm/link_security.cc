#include "comm/link_security.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "secure/aead.h"

namespace hetccl {

LinkSecurity planLinkSecurity(const std::vector<PeerInfo>& peers, int rank, const std::string& intra,
                              const std::string& inter, bool weakSecret) {
  LinkSecurity s;
  s.mode = settings::kEncrypt.get();
  s.rekeyRecords = static_cast<uint64_t>(settings::kEncryptRekeyRecords.get());
  const int n = static_cast<int>(peers.size());
  auto wants = [&](int a, int b) {
    return a != b && (s.mode == "all" || (s.mode == "cross-site" && strcmp(peers[a].site, peers[b].site) != 0));
  };
  auto sameHost = [&](int a, int b) { return peers[a].hostHash == peers[b].hostHash; };
  s.encrypt.assign(n, 0);
  int overShm = 0;
  for (int r = 0; r < n; ++r) {
    if (!wants(rank, r)) continue;
    const std::string& t = sameHost(rank, r) ? intra : inter;
    if (t == "tcp" || t == "ucx" || t == "ofi" || t == "net") {
      s.encrypt[r] = 1;
      ++s.encryptedPeers;
    } else {
      ++overShm;
    }
  }
  if (overShm > 0) LOG_INFO(kTransport, "%d link(s) of another site stay on this host (shm): not encrypted", overShm);
  if (s.encryptedPeers > 0) {
    if (weakSecret)
      throwError(hetcclInvalidUsage,
                 "encrypted links (HETCCL_ENCRYPT=" + s.mode +
                     ") need a job secret of the job's own: the one derived from launcher variables can be guessed. "
                     "Set HETCCL_JOB_SECRET, or HETCCL_JOB_SECRET_FILE to a file only you can read, to the same "
                     "random value on every rank (e.g. openssl rand -hex 32)");
    secure::requireCrypto();
  }
  LOG_INFO(kTransport,
           "encryption %s, site '%s': %d of %d peer link(s) encrypted (AES-256-GCM over tcp, ucx, ofi and net)",
           s.mode.c_str(), peers[rank].site, s.encryptedPeers, n - 1);
  return s;
}

}  // namespace hetccl
