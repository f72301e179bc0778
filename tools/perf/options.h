// hetccl-perf command line: what to measure and how to launch the ranks.
#ifndef HETCCL_TOOLS_PERF_OPTIONS_H_
#define HETCCL_TOOLS_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include <hetccl/hetccl.h>

namespace perf {

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kSendRecv,
  kGather,
  kScatter
};

struct Options {
  size_t minBytes = 32u << 20;  // nccl-tests' defaults
  size_t maxBytes = 32u << 20;
  size_t stepFactor = 2;
  size_t stepBytes = 0;  // > 0: sizes grow by this many bytes instead of by stepFactor
  int iters = 20;
  int warmup = 5;
  bool check = true;
  int blocking = 1;  // -z: accepted for nccl-tests compatibility; host ranks always complete in the call
  hetcclDataType_t dtype = hetcclFloat;
  Coll coll = Coll::kAllReduce;
  hetcclRedOp_t redop = hetcclSum;
  int root = 0;
  std::string jsonPath;
  int np = 0;                        // > 0: fork this many local ranks; 0: one rank per process from the launcher
  std::vector<std::string> groups;   // group name per rank (with --np)
  std::vector<std::string> devices;  // device kind per rank (with --np): host or cuda
  std::string transport;             // empty: the library's default
  int timeoutS = 600;                // --np: the parent kills every rank after this long; 0: no limit
};

// Parses argv. On a bad flag prints why to stderr and exits with status 2;
// -h prints the usage and exits with status 0.
Options parseOptions(int argc, char** argv);

// Sizes to measure, in bytes, from -b/-e/-f/-i.
std::vector<size_t> sizeList(const Options& o);

const char* collName(Coll c);
const char* typeName(hetcclDataType_t dt);
const char* redopName(hetcclRedOp_t op);

// Whether the collective takes a reduction op / a root.
bool collReduces(Coll c);
bool collRooted(Coll c);

}  // namespace perf

#endif  // HETCCL_TOOLS_PERF_OPTIONS_H_
