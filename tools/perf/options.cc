#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace perf {
namespace {

struct Named {
  const char* name;
  int value;
};

// First name of each value is the one printed; later ones are accepted aliases.
const Named kTypes[] = {
    {"int8", hetcclInt8},         {"uint8", hetcclUint8},         {"int32", hetcclInt32},
    {"uint32", hetcclUint32},     {"int64", hetcclInt64},         {"uint64", hetcclUint64},
    {"half", hetcclHalf},         {"float", hetcclFloat},         {"double", hetcclDouble},
    {"bfloat16", hetcclBfloat16}, {"fp8_e4m3", hetcclFloat8e4m3}, {"fp8_e5m2", hetcclFloat8e5m2},
    {"char", hetcclInt8},         {"int", hetcclInt32},           {"uint", hetcclUint32},
    {"float16", hetcclHalf},      {"float32", hetcclFloat},       {"float64", hetcclDouble},
    {"bf16", hetcclBfloat16},     {"f8e4m3", hetcclFloat8e4m3},   {"f8e5m2", hetcclFloat8e5m2},
};
const Named kColls[] = {
    {"allreduce", static_cast<int>(Coll::kAllReduce)},
    {"allgather", static_cast<int>(Coll::kAllGather)},
    {"reducescatter", static_cast<int>(Coll::kReduceScatter)},
    {"broadcast", static_cast<int>(Coll::kBroadcast)},
    {"reduce", static_cast<int>(Coll::kReduce)},
    {"alltoall", static_cast<int>(Coll::kAlltoAll)},
    {"sendrecv", static_cast<int>(Coll::kSendRecv)},
    {"gather", static_cast<int>(Coll::kGather)},
    {"scatter", static_cast<int>(Coll::kScatter)},
};
const Named kOps[] = {
    {"sum", hetcclSum}, {"prod", hetcclProd}, {"max", hetcclMax}, {"min", hetcclMin}, {"avg", hetcclAvg},
};

const char* const kUsage =
    "usage: hetccl-perf [options]\n"
    "  -b, --minbytes SIZE     smallest size in bytes (K/M/G suffixes; default 32M)\n"
    "  -e, --maxbytes SIZE     largest size in bytes (default 32M)\n"
    "  -f, --stepfactor N      multiply the size by N between rows (default 2)\n"
    "  -i, --stepbytes SIZE    add SIZE bytes between rows instead of -f\n"
    "  -n, --iters N           timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations before them (default 5)\n"
    "  -c, --check 0|1         check results against a reference (default 1)\n"
    "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half float double\n"
    "                          bfloat16 fp8_e4m3 fp8_e5m2 (default float)\n"
    "  -o, --op COLL           allreduce allgather reducescatter broadcast reduce alltoall\n"
    "                          sendrecv gather scatter (default allreduce)\n"
    "  -r, --redop OP          sum prod max min avg (default sum)\n"
    "  -R, --root N            root rank of broadcast, reduce, gather, scatter (default 0)\n"
    "  -z, --blocking 0|1      accepted for nccl-tests compatibility; no effect\n"
    "      --json FILE         also write the results as JSON (rank 0)\n"
    "      --np N              fork N local ranks (default: one rank per process, from\n"
    "                          the launcher's environment: torchrun, mpirun, srun)\n"
    "      --groups a,a,b,b    group name of each rank (with --np)\n"
    "  -g, --gpus N            the first N ranks (with --np) are CUDA ranks, on GPU (rank mod GPUs);\n"
    "                          under a launcher: HETCCL_DEVICE=cuda (hip, emu) makes a rank a GPU rank (device "
    "LOCAL_RANK mod devices)\n"
    "      --devices cuda,host,...  device kind of each rank (with --np), instead of -g:\n"
    "                          host, cuda, hip or emu (the emulated GPU, libhetccl-emu.so)\n"
    "      --transport T       tcp, shm, ucx, ofi, net or auto (default: the library's, HETCCL_TRANSPORT)\
"
    "      --timeout S         with --np: kill every rank after S seconds (default 600; 0: never)\n"
    "  -h, --help              this text\n"
    "Sizes are bytes as in nccl-tests: the whole buffer for allreduce, broadcast, reduce and\n"
    "sendrecv; all ranks' parts together for allgather, reducescatter, alltoall, gather, scatter.\n"
    "Exit status: 0 all results right, 1 wrong results, 2 bad usage, 3 a library or system error,\n"
    "4 ranks killed at the --timeout deadline.\n";

[[noreturn]] void usageError(const std::string& why) {
  fprintf(stderr, "hetccl-perf: %s\n(hetccl-perf -h lists the options)\n", why.c_str());
  exit(2);
}

int lookup(const Named* table, size_t n, const char* text, const char* what) {
  for (size_t i = 0; i < n; ++i)
    if (strcasecmp(table[i].name, text) == 0) return table[i].value;
  std::string known;
  for (size_t i = 0; i < n; ++i) {
    // Aliases repeat a value that appeared earlier: list only first names.
    bool alias = false;
    for (size_t j = 0; j < i; ++j) alias = alias || table[j].value == table[i].value;
    if (!alias) known += std::string(known.empty() ? "" : " ") + table[i].name;
  }
  usageError(std::string("unknown ") + what + " '" + text + "' (one of: " + known + ")");
}

const char* nameOf(const Named* table, size_t n, int value) {
  for (size_t i = 0; i < n; ++i)
    if (table[i].value == value) return table[i].name;
  return "?";
}

size_t parseSize(const char* text, const char* flag) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno != 0 || text[0] == '-') usageError(std::string(flag) + ": not a size: '" + text + "'");
  unsigned long long mult = 1;
  switch (*end) {
    case 'K':
    case 'k':
      mult = 1ull << 10;
      ++end;
      break;
    case 'M':
    case 'm':
      mult = 1ull << 20;
      ++end;
      break;
    case 'G':
    case 'g':
      mult = 1ull << 30;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || (v != 0 && mult > std::numeric_limits<size_t>::max() / v))
    usageError(std::string(flag) + ": not a size: '" + text + "' (a number of bytes, K/M/G suffixes allowed)");
  return static_cast<size_t>(v * mult);
}

long parseInt(const char* text, const char* flag, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
    usageError(std::string(flag) + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
               "], got '" + text + "'");
  return v;
}

std::vector<std::string> splitList(const char* text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (cur.empty()) usageError(std::string("--groups: empty group name in '") + text + "'");
      if (cur.size() >= HETCCL_NAME_BYTES)
        usageError("--groups: group name '" + cur + "' is longer than " + std::to_string(HETCCL_NAME_BYTES - 1));
      out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

enum LongOnly { kJson = 256, kNp, kGroups, kTransport, kTimeout, kDevices };

}  // namespace

Options parseOptions(int argc, char** argv) {
  static const option kLong[] = {{"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"redop", required_argument, nullptr, 'r'},
                                 {"root", required_argument, nullptr, 'R'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"json", required_argument, nullptr, kJson},
                                 {"np", required_argument, nullptr, kNp},
                                 {"groups", required_argument, nullptr, kGroups},
                                 {"gpus", required_argument, nullptr, 'g'},
                                 {"devices", required_argument, nullptr, kDevices},
                                 {"transport", required_argument, nullptr, kTransport},
                                 {"timeout", required_argument, nullptr, kTimeout},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  Options o;
  bool sawFactor = false;
  int gpus = -1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:f:i:n:w:c:d:o:r:R:z:g:h", kLong, nullptr)) != -1) {
    switch (c) {
      case 'b': o.minBytes = parseSize(optarg, "-b"); break;
      case 'e': o.maxBytes = parseSize(optarg, "-e"); break;
      case 'f':
        o.stepFactor = static_cast<size_t>(parseInt(optarg, "-f", 2, 1 << 20));
        sawFactor = true;
        break;
      case 'i':
        o.stepBytes = parseSize(optarg, "-i");
        if (o.stepBytes == 0) usageError("-i: the step must be at least 1 byte");
        break;
      case 'n': o.iters = static_cast<int>(parseInt(optarg, "-n", 1, 1 << 30)); break;
      case 'w': o.warmup = static_cast<int>(parseInt(optarg, "-w", 0, 1 << 30)); break;
      case 'c': o.check = parseInt(optarg, "-c", 0, 1) != 0; break;
      case 'd': o.dtype = static_cast<hetcclDataType_t>(lookup(kTypes, std::size(kTypes), optarg, "datatype")); break;
      case 'o': o.coll = static_cast<Coll>(lookup(kColls, std::size(kColls), optarg, "operation")); break;
      case 'r': o.redop = static_cast<hetcclRedOp_t>(lookup(kOps, std::size(kOps), optarg, "reduction op")); break;
      case 'R': o.root = static_cast<int>(parseInt(optarg, "-R", 0, std::numeric_limits<int>::max())); break;
      case 'z': o.blocking = static_cast<int>(parseInt(optarg, "-z", 0, 1)); break;
      case kJson:
        if (!*optarg) usageError("--json: empty file name");
        o.jsonPath = optarg;
        break;
      case kNp: o.np = static_cast<int>(parseInt(optarg, "--np", 1, 1024)); break;
      case kGroups: o.groups = splitList(optarg); break;
      case 'g': gpus = static_cast<int>(parseInt(optarg, "-g", 0, 1024)); break;
      case kDevices:
        o.devices = splitList(optarg);
        for (const auto& d : o.devices)
          if (d != "host" && d != "cuda" && d != "hip" && d != "emu")
            usageError("--devices: expected host, cuda, hip or emu, got '" + d + "'");
        break;
      case kTransport:
        if (strcmp(optarg, "tcp") != 0 && strcmp(optarg, "shm") != 0 && strcmp(optarg, "ucx") != 0 &&
            strcmp(optarg, "ofi") != 0 && strcmp(optarg, "net") != 0 && strcmp(optarg, "auto") != 0)
          usageError(std::string("--transport: expected tcp, shm, ucx, ofi, net or auto, got '") + optarg + "'");
        o.transport = optarg;
        break;
      case kTimeout: o.timeoutS = static_cast<int>(parseInt(optarg, "--timeout", 0, 1 << 30)); break;
      case 'h': fputs(kUsage, stdout); exit(0);
      case ':': usageError(std::string("option ") + argv[optind - 1] + " needs a value");
      default:
        // optopt names an unknown short option, also one inside a cluster like -xv.
        if (optopt > 0 && optopt < 128) usageError(std::string("unknown option -") + static_cast<char>(optopt));
        usageError(std::string("unknown option ") + argv[optind - 1]);
    }
  }
  if (optind < argc) usageError(std::string("unexpected argument '") + argv[optind] + "'");
  if (sawFactor && o.stepBytes > 0) usageError("-f and -i both given: use one");
  if (o.minBytes > o.maxBytes)
    usageError("-b " + std::to_string(o.minBytes) + " is larger than -e " + std::to_string(o.maxBytes));
  if (o.stepBytes == 0 && o.minBytes == 0) usageError("-b 0 with a step factor would never grow: use -b 1 or -i");
  if (!o.groups.empty() && o.np == 0)
    usageError("--groups needs --np (under a launcher, set HETCCL_GROUP or HETCCL_GROUP_MAP instead)");
  if (!o.groups.empty() && static_cast<int>(o.groups.size()) != o.np)
    usageError("--groups names " + std::to_string(o.groups.size()) + " ranks but --np is " + std::to_string(o.np));
  if (gpus >= 0 && !o.devices.empty()) usageError("-g and --devices both given: use one");
  if ((gpus >= 0 || !o.devices.empty()) && o.np == 0)
    usageError("-g/--devices need --np (under a launcher, set HETCCL_DEVICE per rank instead)");
  if (gpus > o.np) usageError("-g " + std::to_string(gpus) + " is more than --np " + std::to_string(o.np));
  if (gpus >= 0)
    for (int r = 0; r < o.np; ++r) o.devices.push_back(r < gpus ? "cuda" : "host");
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.np)
    usageError("--devices names " + std::to_string(o.devices.size()) + " ranks but --np is " + std::to_string(o.np));
  if (o.np > 0 && collRooted(o.coll) && o.root >= o.np)
    usageError("-R " + std::to_string(o.root) + " is not a rank of --np " + std::to_string(o.np));
  return o;
}

std::vector<size_t> sizeList(const Options& o) {
  std::vector<size_t> out;
  for (size_t s = o.minBytes; s <= o.maxBytes;) {
    out.push_back(s);
    size_t next = o.stepBytes > 0 ? s + o.stepBytes : s * o.stepFactor;
    if (next <= s) break;  // overflow
    s = next;
  }
  return out;
}

const char* collName(Coll c) { return nameOf(kColls, std::size(kColls), static_cast<int>(c)); }
const char* typeName(hetcclDataType_t dt) { return nameOf(kTypes, std::size(kTypes), dt); }
const char* redopName(hetcclRedOp_t op) { return nameOf(kOps, std::size(kOps), op); }

bool collReduces(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce; }

bool collRooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

}  // namespace perf
