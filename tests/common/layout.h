// A job layout as the test harnesses take it: "a,a,b,b" names the group of
// each rank ("-": none in the config, so the environment decides, e.g.
// HETCCL_GROUP_MAP); device lists ("cuda,host") read the same way.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace hetccl_test {

// "a,a,b,b" -> {"a","a","b","b"}.
inline std::vector<std::string> parseLayout(const std::string& layout) {
  std::vector<std::string> out;
  std::stringstream ss(layout);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

}  // namespace hetccl_test
