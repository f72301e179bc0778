// GPU correctness matrix: one job of --np local ranks (some of them CUDA
// ranks, see --devices), one communicator, and every collective x data type
// x reduction op at several sizes, in place and out of place, each result
// checked on every rank against hetccl-perf's independent reference (values
// computed from the rank and index, not from another run of the library).
// Exit status 0 only if every call succeeded with every element right.
//
//   gpu_matrix --np 4 --devices cuda,host,host,host --transport shm [--mid BYTES] [--max MiB] [--sample]
//
// --sample (the emulated-GPU suite in `make test`; HETCCL_TEST_FULL=1, as
// `make test-full` sets it, runs everything anyway): AllReduce with every
// type, ReduceScatter and Reduce with every other type each (together
// every type), the collectives that do not reduce with one type of each
// element size (int8, float16, float32, float64); every op throughout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "bench.h"
#include "gpu.h"
#include "launch.h"
#include "options.h"

namespace {

const hetcclDataType_t kTypes[] = {hetcclInt8,    hetcclUint8,    hetcclInt32,      hetcclUint32,
                                   hetcclInt64,   hetcclUint64,   hetcclFloat16,    hetcclFloat32,
                                   hetcclFloat64, hetcclBfloat16, hetcclFloat8e4m3, hetcclFloat8e5m2};
const perf::Coll kColls[] = {perf::Coll::kAllReduce, perf::Coll::kAllGather, perf::Coll::kReduceScatter,
                             perf::Coll::kBroadcast, perf::Coll::kReduce,    perf::Coll::kAlltoAll,
                             perf::Coll::kSendRecv,  perf::Coll::kGather,    perf::Coll::kScatter};
const hetcclRedOp_t kOps[] = {hetcclSum, hetcclProd, hetcclMax, hetcclMin, hetcclAvg};

// Whether --sample keeps type index t (into kTypes) for coll.
bool sampled(perf::Coll coll, size_t t) {
  switch (coll) {
    case perf::Coll::kAllReduce: return true;
    case perf::Coll::kReduceScatter: return t % 2 == 0;
    case perf::Coll::kReduce: return t % 2 == 1;
    default: {
      const hetcclDataType_t dt = kTypes[t];
      return dt == hetcclInt8 || dt == hetcclFloat16 || dt == hetcclFloat32 || dt == hetcclFloat64;
    }
  }
}

int body(const perf::Options& base, size_t midBytes, size_t maxBytes, bool sample, hetcclComm_t comm) {
  int rank = 0, n = 0;
  hetcclCommUserRank(comm, &rank);
  hetcclCommCount(comm, &n);
  long cases = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto one = [&](perf::Coll coll, hetcclDataType_t dt, hetcclRedOp_t op, size_t bytes) {
    perf::Options o = base;
    o.coll = coll;
    o.dtype = dt;
    o.redop = op;
    o.root = n - 1;  // a host rank when the CUDA ranks come first
    o.iters = 1;
    o.warmup = 0;
    o.check = true;
    perf::Bench bench(o, comm, rank, n);
    perf::Row row = bench.measure(bytes);
    ++cases;
    bool bad = row.oop.wrong != 0 || (coll != perf::Coll::kSendRecv && row.ip.wrong != 0);
    if (bad) ++failed;
    if (rank == 0 && (bad || bytes >= (64u << 20)))
      printf("%-14s %-9s %-4s %11zu bytes: out-of-place wrong %lld, in-place wrong %lld, %.1f us%s\n",
             perf::collName(coll), perf::typeName(dt), perf::redopName(op), bytes,
             static_cast<long long>(row.oop.wrong), static_cast<long long>(row.ip.wrong), row.oop.timeUs,
             bad ? "  FAILED" : "");
  };
  // Bad input on a CUDA rank: host memory where device memory is required
  // is refused with a message naming it (peers are not involved: the check
  // runs before anything moves, and the communicator stays usable).
  if (perf::Gpu* gpu = perf::toolGpu()) {
    std::vector<float> host(16, 1.0f);
    hetcclResult_t r = hetcclAllReduce(host.data(), host.data(), 16, hetcclFloat32, hetcclSum, comm, gpu->stream());
    const char* msg = hetcclGetLastError(comm);
    bool ok = r == hetcclInvalidArgument && msg && strstr(msg, "host memory") && strstr(msg, "device");
    ++cases;
    if (!ok) ++failed;
    printf("rank %d: host buffer on a cuda rank: %s (%s)%s\n", rank, hetcclGetErrorString(r), msg ? msg : "",
           ok ? "" : "  FAILED");
  }
  for (perf::Coll coll : kColls) {
    for (size_t t = 0; t < std::size(kTypes); ++t)
      for (hetcclRedOp_t op : kOps) {
        if ((!perf::collReduces(coll) && op != hetcclSum) || (sample && !sampled(coll, t))) continue;
        for (size_t bytes : {size_t{4096}, midBytes}) one(coll, kTypes[t], op, bytes);
      }
    if (rank == 0)
      printf("%-14s %s types, all ops: %ld cases so far, %ld failed, %.1f s\n", perf::collName(coll),
             sample ? "sampled" : "all", cases, failed,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (perf::Coll coll : kColls) one(coll, hetcclFloat32, hetcclSum, maxBytes);
  if (rank == 0) printf("gpu_matrix: %ld cases, %ld failed\n", cases, failed);
  return failed ? perf::kExitWrong : perf::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // progress survives a kill
  perf::Options o;
  size_t maxBytes = 256u << 20, midBytes = (1u << 20) + 4096;
  bool sample = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "gpu_matrix: %s needs a value\n", a.c_str());
        exit(perf::kExitUsage);
      }
      return argv[++i];
    };
    auto list = [](const std::string& s) {
      std::vector<std::string> out;
      size_t at = 0;
      while (at <= s.size()) {
        size_t comma = s.find(',', at);
        if (comma == std::string::npos) comma = s.size();
        out.push_back(s.substr(at, comma - at));
        at = comma + 1;
      }
      return out;
    };
    if (a == "--np")
      o.np = std::stoi(next());
    else if (a == "--devices")
      o.devices = list(next());
    else if (a == "--groups")
      o.groups = list(next());
    else if (a == "--transport")
      o.transport = next();
    else if (a == "--max")
      maxBytes = std::stoull(next()) << 20;
    else if (a == "--mid")
      midBytes = std::stoull(next());
    else if (a == "--sample")
      sample = true;
    else {
      fprintf(stderr, "gpu_matrix: unknown argument %s\n", a.c_str());
      return perf::kExitUsage;
    }
  }
  if (o.np <= 0 || static_cast<int>(o.devices.size()) != o.np) {
    fprintf(stderr, "gpu_matrix: give --np N and --devices with N kinds\n");
    return perf::kExitUsage;
  }
  o.timeoutS = 1200;
  const char* full = getenv("HETCCL_TEST_FULL");
  if (full && strcmp(full, "1") == 0) sample = false;
  return perf::launchLocal(o, [&](hetcclComm_t comm) { return body(o, midBytes, maxBytes, sample, comm); });
}
