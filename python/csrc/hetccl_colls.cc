// The collectives and point-to-point calls of the hetccl torch backend. Each
// builds its buffers, checks what torch handed it, and issues hetccl calls
// through launch(), which stages and orders them (hetccl_backend.cc).
#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>

#include "hetccl_backend.h"

namespace hetccl_torch {

namespace {

using c10d::OpType;

void checkDense(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), msg("hetccl ", what, ": undefined tensor"));
  TORCH_CHECK(t.layout() == at::kStrided, msg("hetccl ", what, ": only dense tensors are supported, got ", t.layout()));
  TORCH_CHECK(t.is_non_overlapping_and_dense(),
              msg("hetccl ", what, ": the tensor must be dense (non-overlapping, no gaps); pass t.contiguous()"));
}

at::Tensor& single(std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1,
              msg("hetccl ", what, ": one tensor per call, got ", ts.size(), " (one process per device)"));
  checkDense(ts[0], what);
  return ts[0];
}

size_t bytesOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// What a collective that only moves data passes for a tensor: its elements
// in its own type where hetccl knows the type, so that a call that differs
// across ranks is reported in elements and types (and a differing type is a
// mismatch too); otherwise its bytes. Point-to-point calls stay in bytes, as
// NCCL's lets a receive take another type of the same size.
struct Moved {
  size_t count;
  hetcclDataType_t dt;
};
Moved moved(const at::Tensor& t) {
  hetcclDataType_t dt{};
  if (knownType(t.scalar_type(), &dt)) return {static_cast<size_t>(t.numel()), dt};
  return {bytesOf(t), hetcclUint8};
}

// Checks the op before anything is staged or issued (reduceTyped maps it
// later); complex tensors reduce as pairs of reals, which is right for sums only.
at::Tensor reducible(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX: break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(t.scalar_type() != at::kBool, msg("hetccl ", what, ": ReduceOp.AVG of bool tensors is undefined"));
      break;
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(at::isFloatingType(t.scalar_type()) || t.is_complex(),
                  msg("hetccl ", what, ": PREMUL_SUM needs a floating-point tensor, got ", t.scalar_type()));
      break;
    default:
      TORCH_CHECK(false, msg("hetccl ", what, ": ReduceOp ", static_cast<int>(op.op_),
                             " (BAND/BOR/BXOR) is not supported; SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM are"));
  }
  if (!t.is_complex()) return t;
  TORCH_CHECK(op.op_ == c10d::ReduceOp::SUM || op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM,
              msg("hetccl ", what, ": complex tensors reduce with SUM, AVG or PREMUL_SUM only"));
  return at::view_as_real(t);
}

void checkRank(int64_t r, int size, const char* what) {
  TORCH_CHECK(r >= 0 && r < size, msg("hetccl ", what, ": rank ", r, " out of range [0, ", size, ")"));
}

void checkSameShape(const at::Tensor& a, const at::Tensor& b, int64_t factor, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              msg("hetccl ", what, ": tensors of types ", a.scalar_type(), " and ", b.scalar_type()));
  TORCH_CHECK(a.numel() == b.numel() * factor,
              msg("hetccl ", what, ": ", a.numel(), " elements where ", b.numel() * factor, " are needed"));
}

std::vector<at::Tensor*> pointers(std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor*> p;
  for (auto& t : ts) p.push_back(&t);
  return p;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> HetcclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  checkRank(opts.rootRank, size_, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return launch(OpType::BROADCAST, "broadcast", {}, {&t}, [&](hetcclStream_t s) {
    const Moved m = moved(t);
    check(hetcclBroadcast(t.data_ptr(), t.data_ptr(), m.count, m.dt, root, comm(), s), "broadcast");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  at::Tensor t = reducible(single(tensors, "allreduce"), opts.reduceOp, "allreduce");
  return launch(OpType::ALLREDUCE, "allreduce", {}, {&t}, [&](hetcclStream_t s) {
    reduceTyped(t, opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
      check(hetcclAllReduce(t.data_ptr(), t.data_ptr(), n, dt, op, comm(), s), "allreduce");
    });
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<at::Tensor> ts;
  for (auto& t : tensors) {
    checkDense(t, "allreduce_coalesced");
    ts.push_back(reducible(t, opts.reduceOp, "allreduce_coalesced"));
  }
  return launch(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", {}, pointers(ts), [&](hetcclStream_t s) {
    for (auto& t : ts)  // in order on every rank: one call each
      reduceTyped(t, opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
        check(hetcclAllReduce(t.data_ptr(), t.data_ptr(), n, dt, op, comm(), s), "allreduce_coalesced");
      });
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  at::Tensor t = reducible(single(tensors, "reduce"), opts.reduceOp, "reduce");
  checkRank(opts.rootRank, size_, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return launch(OpType::REDUCE, "reduce", {}, {&t}, [&](hetcclStream_t s) {
    reduceTyped(t, opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
      check(hetcclReduce(t.data_ptr(), t.data_ptr(), n, dt, op, root, comm(), s), "reduce");
    });
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions&) {
  at::Tensor in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
              msg("hetccl allgather: ", "one output list of ", size_, " tensors is needed"));
  std::vector<at::Tensor> outs = outputs[0];
  for (auto& o : outs) checkSameShape(o, in, 1, "allgather");
  return launch(OpType::ALLGATHER, "allgather", {&in}, pointers(outs), [&](hetcclStream_t s) {
    c10::OptionalStreamGuard side(stream_);  // scratch and copies in the operation's order
    at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
    const Moved m = moved(in);
    check(hetcclAllGather(in.data_ptr(), flat.data_ptr(), m.count, m.dt, comm(), s), "allgather");
    for (int i = 0; i < size_; ++i) outs[i].copy_(flat.narrow(0, i * in.numel(), in.numel()).view(outs[i].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions&) {
  checkDense(input, "allgather_into_tensor");
  checkDense(output, "allgather_into_tensor");
  checkSameShape(output, input, size_, "allgather_into_tensor");
  at::Tensor in = input, out = output;
  return launch(OpType::_ALLGATHER_BASE, "allgather_into_tensor", {&in}, {&out}, [&](hetcclStream_t s) {
    const Moved m = moved(in);
    check(hetcclAllGather(in.data_ptr(), out.data_ptr(), m.count, m.dt, comm(), s), "allgather_into_tensor");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather");
  checkRank(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                msg("hetccl gather: the root needs one output list of ", size_, " tensors"));
    outs = outputs[0];
    for (auto& o : outs) checkSameShape(o, in, 1, "gather");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "hetccl gather: only the root passes output tensors");
  }
  return launch(OpType::GATHER, "gather", {&in}, pointers(outs), [&](hetcclStream_t s) {
    c10::OptionalStreamGuard side(stream_);
    at::Tensor flat;
    if (rank_ == root) flat = at::empty({size_ * in.numel()}, in.options());
    const Moved m = moved(in);
    check(hetcclGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, m.count, m.dt, root, comm(), s),
          "gather");
    for (size_t i = 0; i < outs.size(); ++i)
      outs[i].copy_(flat.narrow(0, i * in.numel(), in.numel()).view(outs[i].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::scatter(std::vector<at::Tensor>& outputs,
                                                      std::vector<std::vector<at::Tensor>>& inputs,
                                                      const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  checkRank(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                msg("hetccl scatter: the root needs one input list of ", size_, " tensors"));
    ins = inputs[0];
    for (auto& i : ins) checkSameShape(i, out, 1, "scatter");
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "hetccl scatter: only the root passes input tensors");
  }
  return launch(OpType::SCATTER, "scatter", pointers(ins), {&out}, [&](hetcclStream_t s) {
    c10::OptionalStreamGuard side(stream_);
    at::Tensor flat;
    if (!ins.empty()) {
      std::vector<at::Tensor> rows;
      for (auto& i : ins) rows.push_back(i.reshape({-1}));
      flat = at::cat(rows);
    }
    const Moved m = moved(out);
    check(hetcclScatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), m.count, m.dt, root, comm(), s),
          "scatter");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = reducible(single(outputs, "reduce_scatter"), opts.reduceOp, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
              msg("hetccl reduce_scatter: ", "one input list of ", size_, " tensors is needed"));
  std::vector<at::Tensor> ins;
  for (auto& i : inputs[0]) ins.push_back(reducible(i, opts.reduceOp, "reduce_scatter"));
  for (auto& i : ins) checkSameShape(i, out, 1, "reduce_scatter");
  return launch(OpType::REDUCE_SCATTER, "reduce_scatter", pointers(ins), {&out}, [&](hetcclStream_t s) {
    c10::OptionalStreamGuard side(stream_);
    std::vector<at::Tensor> rows;
    for (auto& i : ins) rows.push_back(i.reshape({-1}));
    at::Tensor flat = at::cat(rows);
    reduceTyped(out, opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
      check(hetcclReduceScatter(flat.data_ptr(), out.data_ptr(), n, dt, op, comm(), s), "reduce_scatter");
    });
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::ReduceScatterOptions& opts) {
  checkDense(input, "reduce_scatter_tensor");
  checkDense(output, "reduce_scatter_tensor");
  at::Tensor in = reducible(input, opts.reduceOp, "reduce_scatter_tensor");
  at::Tensor out = reducible(output, opts.reduceOp, "reduce_scatter_tensor");
  checkSameShape(in, out, size_, "reduce_scatter_tensor");
  return launch(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {&in}, {&out}, [&](hetcclStream_t s) {
    reduceTyped(out, opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
      check(hetcclReduceScatter(in.data_ptr(), out.data_ptr(), n, dt, op, comm(), s), "reduce_scatter_tensor");
    });
  });
}

#if HETCCL_TORCH2
c10::intrusive_ptr<c10d::Work> HetcclBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), msg("hetccl allgather_into_tensor_coalesced: ", outputs.size(),
                                                   " outputs for ", inputs.size(), " inputs"));
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  for (size_t i = 0; i < ins.size(); ++i) {
    checkDense(ins[i], "allgather_into_tensor_coalesced");
    checkDense(outs[i], "allgather_into_tensor_coalesced");
    checkSameShape(outs[i], ins[i], size_, "allgather_into_tensor_coalesced");
  }
  return launch(OpType::COALESCED, "allgather_into_tensor_coalesced", pointers(ins), pointers(outs),
                [&](hetcclStream_t s) {
                  for (size_t i = 0; i < ins.size(); ++i) {
                    const Moved m = moved(ins[i]);
                    check(hetcclAllGather(ins[i].data_ptr(), outs[i].data_ptr(), m.count, m.dt, comm(), s),
                          "allgather_into_tensor_coalesced");
                  }
                });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), msg("hetccl reduce_scatter_tensor_coalesced: ", outputs.size(),
                                                   " outputs for ", inputs.size(), " inputs"));
  std::vector<at::Tensor> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(inputs[i], "reduce_scatter_tensor_coalesced");
    checkDense(outputs[i], "reduce_scatter_tensor_coalesced");
    ins.push_back(reducible(inputs[i], opts.reduceOp, "reduce_scatter_tensor_coalesced"));
    outs.push_back(reducible(outputs[i], opts.reduceOp, "reduce_scatter_tensor_coalesced"));
    checkSameShape(ins[i], outs[i], size_, "reduce_scatter_tensor_coalesced");
  }
  return launch(OpType::COALESCED, "reduce_scatter_tensor_coalesced", pointers(ins), pointers(outs),
                [&](hetcclStream_t s) {
                  for (size_t i = 0; i < ins.size(); ++i)
                    reduceTyped(outs[i], opts.reduceOp, [&](hetcclDataType_t dt, hetcclRedOp_t op, size_t n) {
                      check(hetcclReduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), n, dt, op, comm(), s),
                            "reduce_scatter_tensor_coalesced");
                    });
                });
}
#endif

c10::intrusive_ptr<c10d::Work> HetcclBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                            std::vector<int64_t>& outputSplits,
                                                            std::vector<int64_t>& inputSplits,
                                                            const c10d::AllToAllOptions&) {
  checkDense(input, "all_to_all_single");
  checkDense(output, "all_to_all_single");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              msg("hetccl all_to_all_single: tensors of types ", input.scalar_type(), " and ", output.scalar_type()));
  at::Tensor in = input, out = output;
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(in.numel() == out.numel() && in.numel() % size_ == 0,
                msg("hetccl all_to_all_single: ", in.numel(), " and ", out.numel(),
                    " elements do not split evenly over ", size_, " ranks"));
    return launch(OpType::ALLTOALL_BASE, "all_to_all_single", {&in}, {&out}, [&](hetcclStream_t s) {
      check(hetcclAlltoAll(in.data_ptr(), out.data_ptr(), bytesOf(in) / size_, hetcclUint8, comm(), s),
            "all_to_all_single");
    });
  }
  // Uneven splits, in rows of dimension 0: one send and one receive per peer.
  auto offsets = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() ? t.size(0) : 1;
    const size_t rowBytes = rows ? bytesOf(t) / rows : 0;
    std::vector<std::pair<size_t, size_t>> o;  // (offset, bytes) per rank
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, msg("hetccl all_to_all_single: ", rows, " rows of the ", which,
                                         " do not split evenly over ", size_, " ranks"));
      for (int r = 0; r < size_; ++r) o.emplace_back(r * (rows / size_) * rowBytes, (rows / size_) * rowBytes);
      return o;
    }
    TORCH_CHECK(splits.size() == static_cast<size_t>(size_),
                msg("hetccl all_to_all_single: ", splits.size(), " ", which, " splits for ", size_, " ranks"));
    int64_t at = 0;
    for (int64_t n : splits) {
      TORCH_CHECK(n >= 0, msg("hetccl all_to_all_single: negative split ", n));
      o.emplace_back(at * rowBytes, n * rowBytes);
      at += n;
    }
    TORCH_CHECK(at <= rows, msg("hetccl all_to_all_single: the ", which, " splits add up to ", at, " rows of ", rows));
    return o;
  };
  auto send = offsets(in, inputSplits, "input");
  auto recv = offsets(out, outputSplits, "output");
  return launch(OpType::ALLTOALL_BASE, "all_to_all_single", {&in}, {&out}, [&](hetcclStream_t s) {
    auto* src = static_cast<const char*>(in.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    check(hetcclGroupStart(), "all_to_all_single");
    for (int r = 0; r < size_; ++r) {
      check(hetcclSend(src + send[r].first, send[r].second, hetcclUint8, r, comm(), s), "all_to_all_single");
      check(hetcclRecv(dst + recv[r].first, recv[r].second, hetcclUint8, r, comm(), s), "all_to_all_single");
    }
    check(hetcclGroupEnd(), "all_to_all_single");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              msg("hetccl all_to_all: ", size_, " input and output tensors are needed, got ", inputs.size(), " and ",
                  outputs.size()));
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  for (int r = 0; r < size_; ++r) {
    checkDense(ins[r], "all_to_all");
    checkDense(outs[r], "all_to_all");
  }
  return launch(OpType::ALLTOALL, "all_to_all", pointers(ins), pointers(outs), [&](hetcclStream_t s) {
    check(hetcclGroupStart(), "all_to_all");
    for (int r = 0; r < size_; ++r) {
      check(hetcclSend(ins[r].data_ptr(), bytesOf(ins[r]), hetcclUint8, r, comm(), s), "all_to_all");
      check(hetcclRecv(outs[r].data_ptr(), bytesOf(outs[r]), hetcclUint8, r, comm(), s), "all_to_all");
    }
    check(hetcclGroupEnd(), "all_to_all");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  at::Tensor t = single(tensors, "send");
  checkRank(dstRank, size_, "send");
  return launch(OpType::SEND, "send", {&t}, {}, [&](hetcclStream_t s) {
    check(hetcclSend(t.data_ptr(), bytesOf(t), hetcclUint8, dstRank, comm(), s), "send");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  at::Tensor t = single(tensors, "recv");
  checkRank(srcRank, size_, "recv");
  return launch(OpType::RECV, "recv", {}, {&t}, [&](hetcclStream_t s) {
    check(hetcclRecv(t.data_ptr(), bytesOf(t), hetcclUint8, srcRank, comm(), s), "recv");
  });
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "hetccl: recv from any source is not supported; name the source rank");
}

c10::intrusive_ptr<c10d::Work> HetcclBackend::barrier(const c10d::BarrierOptions&) {
  at::Tensor t = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(rankDevice()));
  return launch(
      OpType::BARRIER, "barrier", {}, {&t},
      [&](hetcclStream_t s) {
        check(hetcclAllReduce(t.data_ptr(), t.data_ptr(), 1, hetcclFloat32, hetcclSum, comm(), s), "barrier");
      },
      /*hostWait=*/true);
}

}  // namespace hetccl_torch
