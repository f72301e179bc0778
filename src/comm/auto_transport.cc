#include "comm/auto_transport.h"

#include <algorithm>
#include <cctype>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/transport.h"

namespace hetccl {

std::vector<std::string> parseAutoInter(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    std::string name = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    for (char& c : name) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
    if (name != "ucx" && name != "ofi" && name != "tcp")
      throwError(hetcclInvalidArgument, "HETCCL_AUTO_INTER='" + text + "': '" + name +
                                            "' is not a transport between hosts (a comma list of ucx, ofi, tcp)");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throwError(hetcclInvalidArgument, "HETCCL_AUTO_INTER='" + text + "': " + name + " is named twice");
    out.push_back(name);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

InterChoice pickInter(const std::vector<std::string>& order, const std::vector<InterFacts>& ranks) {
  std::string skipped;
  for (const std::string& name : order) {
    int lacking = -1;  // the first rank the transport does not fit
    for (size_t r = 0; r < ranks.size() && lacking < 0; ++r)
      if ((name == "ucx" && !ranks[r].ucxRdma) || (name == "ofi" && !ranks[r].ofiHardware))
        lacking = static_cast<int>(r);
    if (lacking < 0) {
      std::string why = name == "ucx"   ? "every rank has UCX and an RDMA device"
                        : name == "ofi" ? "every rank's libfabric offers a hardware provider"
                                        : "tcp reaches every host";
      return {name, why + skipped};
    }
    skipped += "; not " + name + ": rank " + std::to_string(lacking) +
               (name == "ucx" ? " has no UCX with an RDMA device" : " has no libfabric hardware provider");
  }
  return {"tcp", "none of HETCCL_AUTO_INTER fits every rank" + skipped};
}

InterChoice chooseInterTransport(Bootstrap& bootstrap, int rank, int nranks, const std::vector<std::string>& order) {
  // One probe and one exchange per transport in order, until one fits every
  // rank: a transport after the one chosen is never probed (libfabric's
  // fi_getinfo walks every provider it has). So every rank must walk the
  // same order: checked first, else ranks would exchange out of step.
  std::string orderText;
  for (const auto& n : order) orderText += (orderText.empty() ? "" : ",") + n;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a of the order's text
  for (char ch : orderText) hash = (hash ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  std::vector<uint64_t> hashes(static_cast<size_t>(nranks), 0);
  hashes[rank] = hash;
  bootstrap.allGather(hashes.data(), sizeof(uint64_t));
  for (int r = 0; r < nranks; ++r)
    if (hashes[r] != hash)
      throwError(hetcclInvalidUsage, "HETCCL_AUTO_INTER differs between rank " + std::to_string(r) + " and rank " +
                                         std::to_string(rank) + " ('" + orderText +
                                         "'): every rank must set the same order");
  std::vector<InterFacts> ranks(static_cast<size_t>(nranks));
  std::string provider;
  for (const std::string& name : order) {
    if (name == "tcp") break;
    uint8_t mine = 0;
    if (name == "ucx") {
      mine = ucxRdmaAvailable() ? 1 : 0;
    } else {
      provider = ofiHardwareProvider();
      mine = provider.empty() ? 0 : 1;
    }
    std::vector<uint8_t> facts(static_cast<size_t>(nranks), 0);
    facts[rank] = mine;
    bootstrap.allGather(facts.data(), 1);
    bool all = true;
    for (int r = 0; r < nranks; ++r) {
      (name == "ucx" ? ranks[r].ucxRdma : ranks[r].ofiHardware) = facts[r] != 0;
      all = all && facts[r] != 0;
    }
    if (all) break;
  }
  InterChoice c = pickInter(order, ranks);
  const std::string mine = provider.empty() ? "" : "; this rank's libfabric provider: " + provider;
  LOG_INFO(kTransport, "transport between hosts: %s (HETCCL_TRANSPORT=auto, HETCCL_AUTO_INTER=%s): %s%s",
           c.name.c_str(), orderText.c_str(), c.reason.c_str(), mine.c_str());
  return c;
}

}  // namespace hetccl
