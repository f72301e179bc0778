#include "layouts.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hmp {

bool fullTests() {
  const char* full = getenv("HETCCL_TEST_FULL");
  return full && *full && std::string(full) != "0";
}

void expectInfoMatchesLayout(const Rank& r) {
  hetcclCommInfo_t info{};
  info.size = sizeof(info);
  HC_ASSERT_OK(hetcclCommGetInfo(r.comm, &info), r.comm);
  // Groups are numbered by first appearance in rank order; a rank's index
  // in its group counts the lower ranks of that group.
  const std::vector<std::string> names = r.groupNames();
  const int mine = static_cast<int>(std::find(names.begin(), names.end(), r.group) - names.begin());
  const int myGroupRank = static_cast<int>(std::count(r.layout.begin(), r.layout.begin() + r.rank, r.group));
  EXPECT_EQ(info.size, sizeof(info));
  EXPECT_EQ(info.rank, r.rank);
  EXPECT_EQ(info.nranks, r.nranks);
  ASSERT_EQ(info.ngroups, static_cast<int>(names.size()));
  EXPECT_EQ(info.myGroup, mine);
  EXPECT_EQ(info.myGroupRank, myGroupRank);
  bool equalSizes = true;
  for (size_t g = 0; g < names.size(); ++g) {
    int size = static_cast<int>(std::count(r.layout.begin(), r.layout.end(), names[g]));
    equalSizes =
        equalSizes && size == static_cast<int>(r.layout.size() / names.size()) && r.layout.size() % names.size() == 0;
    EXPECT_STREQ(info.groupName[g], names[g].c_str()) << "group " << g;
    EXPECT_EQ(info.groupSize[g], size) << "group " << g;
    EXPECT_STREQ(info.groupBackend[g], "host") << "group " << g;
  }
  EXPECT_STREQ(info.deviceKind, "host");
  EXPECT_STREQ(info.transport, r.transport.c_str());
  // A large AllReduce crosses the border only between groups: with one group
  // there is no border; with equal groups every shard has one owner in each
  // other group.
  const int mySize = info.groupSize[mine];
  EXPECT_STREQ(info.borderPath, names.size() == 1 ? "none" : "host");
  if (names.size() == 1) {
    EXPECT_EQ(info.borderPeers, 0);
  } else if (equalSizes) {
    EXPECT_EQ(info.borderPeers, static_cast<int>(names.size()) - 1);
  } else {
    EXPECT_GE(info.borderPeers, 1);
    EXPECT_LE(info.borderPeers, r.nranks - mySize);
  }
  // The size cut unless a test asked for the bandwidth one.
  if (!getenv("HETCCL_BORDER_CUT")) {
    EXPECT_STREQ(info.borderCut, "size");
    EXPECT_EQ(info.borderGbps, 0.0);
    EXPECT_DOUBLE_EQ(info.borderShare, 1.0 / mySize);
  }
}

}  // namespace hmp
