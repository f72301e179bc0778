#include "backend/wrapping_backend.h"

namespace hetccl {

void WrappingBackend::allReduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, Stream s) {
  route({"AllReduce", count, dt, [=](Backend& be, Stream st) { be.allReduce(send, recv, count, dt, op, st); }}, s);
}

void WrappingBackend::reduceScatter(const void* send, void* recv, size_t recvcount, DataType dt, const ReduceOp& op,
                                    Stream s) {
  route({"ReduceScatter", recvcount * static_cast<size_t>(nranks()), dt,
         [=](Backend& be, Stream st) { be.reduceScatter(send, recv, recvcount, dt, op, st); }},
        s);
}

void WrappingBackend::allGather(const void* send, void* recv, size_t sendcount, DataType dt, Stream s) {
  route({"AllGather", sendcount * static_cast<size_t>(nranks()), dt,
         [=](Backend& be, Stream st) { be.allGather(send, recv, sendcount, dt, st); }},
        s);
}

void WrappingBackend::broadcast(const void* send, void* recv, size_t count, DataType dt, int root, Stream s) {
  route({"Broadcast", count, dt, [=](Backend& be, Stream st) { be.broadcast(send, recv, count, dt, root, st); }}, s);
}

void WrappingBackend::reduce(const void* send, void* recv, size_t count, DataType dt, const ReduceOp& op, int root,
                             Stream s) {
  route({"Reduce", count, dt, [=](Backend& be, Stream st) { be.reduce(send, recv, count, dt, op, root, st); }}, s);
}

void WrappingBackend::reduceScatterShards(const void* send, void* recv, const std::vector<size_t>& bounds, DataType dt,
                                          const ReduceOp& op, Stream s) {
  route({"ReduceScatter", bounds.back(), dt,
         [=](Backend& be, Stream st) { be.reduceScatterShards(send, recv, bounds, dt, op, st); }},
        s);
}

void WrappingBackend::allGatherShards(void* buf, const std::vector<size_t>& bounds, DataType dt, Stream s) {
  route({"AllGather", bounds.back(), dt, [=](Backend& be, Stream st) { be.allGatherShards(buf, bounds, dt, st); }}, s);
}

void WrappingBackend::send(const void* buf, size_t count, DataType dt, int peer, Stream s) {
  route({"Send", count, dt, [=](Backend& be, Stream st) { be.send(buf, count, dt, peer, st); }}, s);
}

void WrappingBackend::recv(void* buf, size_t count, DataType dt, int peer, Stream s) {
  route({"Recv", count, dt, [=](Backend& be, Stream st) { be.recv(buf, count, dt, peer, st); }}, s);
}

}  // namespace hetccl
