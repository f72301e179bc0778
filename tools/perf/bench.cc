#include "bench.h"

#include <ctime>
#include <exception>

#include "buffers.h"
#include "reference/elements.h"
#include "gpu.h"

namespace perf {
namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

// Out of place: send and recv. In place: one buffer holding both. On a GPU
// rank each host buffer (guards included) has a device mirror that the calls
// use: inputs are uploaded after prepare(), outputs downloaded before checks.
struct Bench::Buffers {
  GuardedBuffer send, recv, inPlace;
  Gpu* gpu;
  unsigned char* dev[3] = {nullptr, nullptr, nullptr};
  Buffers(const Geometry& g, size_t es, Gpu* gp)
      : send(g.sendElems * es), recv(g.recvElems * es), inPlace(g.inPlaceElems * es), gpu(gp) {
    if (!gpu) return;
    GuardedBuffer* all[3] = {&send, &recv, &inPlace};
    for (int i = 0; i < 3; ++i) dev[i] = static_cast<unsigned char*>(gpu->alloc(all[i]->rawBytes()));
  }
  // Left to the process's exit while a failed call unwinds: freeing device
  // memory synchronises the device, whose streams may hold the vendor
  // library's calls that only the communicator's abort (after the unwind)
  // ends.
  ~Buffers() {
    if (gpu && std::uncaught_exceptions() == 0)
      for (unsigned char* d : dev) gpu->free(d);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  // Where the calls see buffer i's data.
  unsigned char* at(int i) {
    GuardedBuffer* all[3] = {&send, &recv, &inPlace};
    return gpu ? dev[i] + GuardedBuffer::guardBytes() : all[i]->data();
  }
  unsigned char* sendPtr(const Geometry& g, bool ip, size_t es) { return ip ? at(2) + g.sendOffset * es : at(0); }
  unsigned char* recvPtr(const Geometry& g, bool ip, size_t es) { return ip ? at(2) + g.recvOffset * es : at(1); }
  void upload() {
    GuardedBuffer* all[3] = {&send, &recv, &inPlace};
    if (gpu)
      for (int i = 0; i < 3; ++i) gpu->toDevice(dev[i], all[i]->raw(), all[i]->rawBytes());
  }
  void download() {
    GuardedBuffer* all[3] = {&send, &recv, &inPlace};
    if (gpu)
      for (int i = 0; i < 3; ++i) gpu->toHost(all[i]->raw(), dev[i], all[i]->rawBytes());
  }
  // Host view of a pointer handed to the calls.
  unsigned char* host(unsigned char* p) {
    if (!gpu) return p;
    GuardedBuffer* all[3] = {&send, &recv, &inPlace};
    for (int i = 0; i < 3; ++i)
      if (p >= dev[i] && p < dev[i] + all[i]->rawBytes()) return all[i]->raw() + (p - dev[i]);
    return p;
  }
};

Bench::Bench(const Options& o, hetcclComm_t comm, int rank, int nranks)
    : o_(o),
      call_{o.coll, o.dtype, o.redop, o.root, comm, rank, nranks, toolGpu() ? toolGpu()->stream() : nullptr},
      rank_(rank),
      nranks_(nranks),
      es_(ref::typeSize(o.dtype)),
      ref_(o.coll, o.dtype, o.redop, nranks, o.root) {}

void Bench::warmup(size_t bytes) {
  Geometry g = geometryFor(o_.coll, bytes, es_, nranks_, rank_);
  Buffers b(g, es_, toolGpu());
  for (bool inPlace : {false, true}) {
    prepare(g, inPlace, b);
    for (int i = 0; i < o_.warmup; ++i) runColl(call_, b.sendPtr(g, inPlace, es_), b.recvPtr(g, inPlace, es_), g.count);
    if (toolGpu()) toolGpu()->sync();  // before the buffers go
  }
}

Row Bench::measure(size_t bytes) {
  Geometry g = geometryFor(o_.coll, bytes, es_, nranks_, rank_);
  Buffers b(g, es_, toolGpu());
  Row row;
  row.bytes = g.bytes;
  row.count = g.count;
  row.oop = run(g, false, b);
  row.ip = run(g, true, b);
  return row;
}

// Poisons the outputs and writes this rank's input. Broadcast and scatter
// read no input off the root: there the in-place buffer stays all poison, so
// an output the library never writes cannot pass for the right one.
void Bench::prepare(const Geometry& g, bool inPlace, Buffers& b) {
  if (!inPlace) {
    ref_.fill(rank_, b.send.data(), g.sendElems);
    b.recv.poison();
    b.upload();
    return;
  }
  b.inPlace.poison();
  bool readsInput = !(o_.coll == Coll::kBroadcast || o_.coll == Coll::kScatter) || rank_ == o_.root;
  if (readsInput) ref_.fill(rank_, b.host(b.sendPtr(g, true, es_)), g.sendElems);
  b.upload();
}

int64_t Bench::localWrong(const Geometry& g, bool inPlace, Buffers& b) {
  b.download();
  int64_t wrong = ref_.countWrongOutput(rank_, g, b.host(b.recvPtr(g, inPlace, es_)));
  if (inPlace) {
    wrong += static_cast<int64_t>(b.inPlace.damagedGuardBytes());
  } else {
    // sendbuff is const: the call must leave it as it was.
    wrong += ref_.countChangedInput(rank_, b.send.data(), g.sendElems);
    wrong += static_cast<int64_t>(b.send.damagedGuardBytes() + b.recv.damagedGuardBytes());
  }
  return wrong;
}

Result Bench::run(const Geometry& g, bool inPlace, Buffers& b) {
  const void* send = b.sendPtr(g, inPlace, es_);
  void* recv = b.recvPtr(g, inPlace, es_);
  prepare(g, inPlace, b);
  for (int i = 0; i < o_.warmup; ++i) runColl(call_, send, recv, g.count);
  barrier(call_.comm);
  double t0 = now();
  for (int i = 0; i < o_.iters; ++i) runColl(call_, send, recv, g.count);
  if (toolGpu()) toolGpu()->sync();  // the calls only enqueued work
  double perIter = (now() - t0) / o_.iters;
  perIter = allReduceMax(call_.comm, perIter);

  Result res;
  res.timeUs = perIter * 1e6;
  res.algbw = perIter > 0 ? static_cast<double>(g.bytes) / perIter / 1e9 : 0.0;
  res.busbw = res.algbw * g.busFactor;
  // As nccl-tests: in-place sendrecv (sendbuff == recvbuff, sent and received
  // in one group) is timed but its result is not defined, so not checked.
  if (!o_.check || (inPlace && o_.coll == Coll::kSendRecv)) return res;

  // One more call on fresh inputs, apart from the timed ones.
  prepare(g, inPlace, b);
  runColl(call_, send, recv, g.count);
  int64_t wrong = localWrong(g, inPlace, b);
  if (o_.coll == Coll::kAllReduce) {
    // Every rank must hold the same bits, not just values within tolerance.
    uint64_t h = hashBytes(b.host(static_cast<unsigned char*>(recv)), g.count * es_);
    uint64_t hi = allReduceU64(call_.comm, h, hetcclMax), lo = allReduceU64(call_.comm, h, hetcclMin);
    if (hi != lo && rank_ == 0) wrong += 1;
  }
  res.wrong = allReduceSum(call_.comm, wrong);
  return res;
}

}  // namespace perf
