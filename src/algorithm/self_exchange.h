// Sends to self and receives from self of one group call: the k-th send
// pairs with the k-th receive, of equal bytes (as NCCL pairs them). The
// exchange plan (host ranks) and the staged backend (a GPU group of one)
// both copy them so.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/bytes.h"

namespace hetccl {

struct SelfSide {
  void* ptr;
  size_t bytes;
};

// Copies every pair, or copies nothing and returns why they do not pair
// ("" when they did).
inline std::string copySelfExchanges(const std::vector<SelfSide>& sends, const std::vector<SelfSide>& recvs) {
  if (sends.size() != recvs.size())
    return std::to_string(sends.size()) + " sends to self but " + std::to_string(recvs.size()) +
           " receives from self in one group call";
  for (size_t k = 0; k < sends.size(); ++k)
    if (sends[k].bytes != recvs[k].bytes)
      return "send to self of " + std::to_string(sends[k].bytes) + " bytes meets a receive of " +
             std::to_string(recvs[k].bytes) + " bytes";
  for (size_t k = 0; k < sends.size(); ++k) copyBytes(recvs[k].ptr, sends[k].ptr, sends[k].bytes);
  return "";
}

}  // namespace hetccl
