// HETCCL_TRANSPORT=auto between hosts: the first transport of
// HETCCL_AUTO_INTER (default ucx,ofi,tcp) that fits every rank, decided by
// every rank alike from the same all-gathered facts.
#pragma once

#include <string>
#include <vector>

namespace hetccl {

class Bootstrap;

// What one rank can run between hosts.
struct InterFacts {
  bool ucxRdma = false;      // UCX loads and the kernel lists an RDMA device
  bool ofiHardware = false;  // libfabric offers a hardware provider (efa, cxi, verbs...)
};

// "ucx,ofi,tcp" -> its names, lower case. Throws InvalidArgument naming the
// setting and the value on an empty list, an unknown or a repeated name.
std::vector<std::string> parseAutoInter(const std::string& text);

struct InterChoice {
  std::string name;
  std::string reason;  // for the log: why this one, and why not the ones before it
};

// The first name of `order` every rank's facts fit (tcp fits all), else tcp.
InterChoice pickInter(const std::vector<std::string>& order, const std::vector<InterFacts>& ranks);

// Gathers every rank's facts (probing only what `order` names) and picks.
// Collective over the bootstrap.
InterChoice chooseInterTransport(Bootstrap& bootstrap, int rank, int nranks, const std::vector<std::string>& order);

}  // namespace hetccl
