// One rank of a job that mpirun starts (see CMakeLists.txt: 4 ranks,
// HETCCL_GROUP_MAP=0-1:a,2-3:b): hetcclCommInitFromEnv finds the Open MPI
// variables (OMPI_COMM_WORLD_*), forms the groups from the map, and the
// collectives are checked as in the other multi-process tests. Run without
// mpirun, the test skips.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "checks.h"
#include "layouts.h"

namespace hmp {
namespace {

// The layout a HETCCL_GROUP_MAP describes ("0-1:a,2-3:b"), for n ranks.
std::vector<std::string> layoutFromMap(const std::string& map, int n) {
  std::vector<std::string> layout(n);
  std::stringstream ss(map);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t colon = item.find(':'), dash = item.find('-');
    int lo = std::stoi(item.substr(0, dash < colon ? dash : colon));
    int hi = dash < colon ? std::stoi(item.substr(dash + 1, colon - dash - 1)) : lo;
    for (int r = lo; r <= hi && r < n; ++r) layout[r] = item.substr(colon + 1);
  }
  return layout;
}

TEST(Mpirun, InitFromEnvAcrossGroups) {
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  const char* size = getenv("OMPI_COMM_WORLD_SIZE");
  const char* map = getenv("HETCCL_GROUP_MAP");
  // ctest passes HETCCL_GROUP_MAP through mpirun: with it but without the
  // Open MPI variables, the launcher is not Open MPI's and the test must not
  // pass silently.
  if (!rank || !size) {
    if (map)
      FAIL() << "HETCCL_GROUP_MAP is set but OMPI_COMM_WORLD_RANK/SIZE are not: not started by Open MPI's mpirun?";
    GTEST_SKIP() << "not started by mpirun (no OMPI_COMM_WORLD_RANK)";
  }
  ASSERT_NE(map, nullptr) << "run with -x HETCCL_GROUP_MAP=...";
  Rank r;
  r.rank = atoi(rank);
  r.nranks = atoi(size);
  r.layout = layoutFromMap(map, r.nranks);
  r.group = r.layout[r.rank];
  const char* transport = getenv("HETCCL_TRANSPORT");
  r.transport = transport && strcmp(transport, "auto") != 0 ? transport : "shm";  // auto: shm on one host
  try {
    HC_ASSERT_OK(hetcclCommInitFromEnv(&r.comm, nullptr), nullptr);
    expectInfoMatchesLayout(r);
    Checker ck(r);
    uint64_t seed = 10;
    for (Coll coll : allColls())
      for (hetcclDataType_t dt : {hetcclFloat32, hetcclInt64, hetcclFloat8e4m3}) {
        Check c;
        c.coll = coll;
        c.dt = dt;
        c.count = 1000;
        c.root = static_cast<int>(seed % r.nranks);
        c.seed = ++seed;
        ck.run(c);
      }
  } catch (const AbortRank&) {
  }
  if (r.comm) HC_EXPECT_OK(hetcclCommDestroy(r.comm), r.comm);
}

}  // namespace
}  // namespace hmp

int main(int argc, char** argv) {
  // CMake found no mpirun: say so and report "skipped" to ctest.
  if (argc > 1 && strcmp(argv[1], "--mpirun-missing") == 0) {
    printf("SKIPPED: mpirun (Open MPI) was not found when CMake configured the build; install it to run this test\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
