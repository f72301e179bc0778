#include "border/border_choice.h"

namespace hetccl {

std::string deviceBorderWhyNot(const DeviceBorderFacts& f) {
  if (f.groupKinds.size() < 2) return kNotEveryRankSays;
  for (const std::string& k : f.groupKinds)
    if (k == "host") return kNotEveryRankSays;
  if (f.want == "0") return "HETCCL_GPU_BORDER=0";
  return "";
}

}  // namespace hetccl
