"""FSDP2's fully_shard over hetccl's vendor groups, on the GPU machine (PyTorch 2.6+, written for 2.11):

    hetccl-torch-run python3 tests/gpu/torch_fsdp2_subgroups.py --backend nccl       # the drop-in
    PYTHONPATH=build-gpu/pysite python3 tests/gpu/torch_fsdp2_subgroups.py --backend hetccl   # native

NOT RUN IN CI, AND NOT RUN YET ON A GPU: CI's torch (Debian's 1.13) has no
fully_shard, DeviceMesh or DTensor, and the machine that writes this has no
GPU; here it is only compiled (py_compile). scripts/gpu-check.sh runs it
(step "fsdp2"). The CPU version that CI runs, with the sharding written by
hand: tests/torch/sharded_subgroups.py.

Four processes, each a GPU rank, and a small transformer (embedding, one
block of attention and MLP, head; fp32, TF32 off). Two layouts, each 10
steps of AdamW, whose global losses must equal one process on the whole
global batch at every step (relative difference <= 1e-5: fp32 in another
summation order, as the CPU test):
  - fsdp: fully_shard of every block and the root over a 1-D mesh of all
    four ranks (two vendor groups: its all-gathers and reduce-scatters cross
    them);
  - 2d: a (dp, tp) = (2, 2) mesh, tensor parallel over mesh["tp"]
    (ColwiseParallel on q, k, v, the MLP's first linear and the head,
    RowwiseParallel on the attention's output, the MLP's second linear and
    the embedding), then fully_shard over mesh["dp"].
    Rows of the mesh are the TP pairs [0, 1] and [2, 3], columns the DP
    pairs [0, 2] and [1, 3].
  - a subgroup made by split_group (ncclCommSplit under the nccl backend;
    init_device_mesh splits too where the default group is bound to a
    device, as here with the nccl backend): an all_reduce on it.
--groups names each rank's hetccl group. On one GPU the default is a group
per process (g0,g1,g2,g3): two ranks of one group on one GPU would be two
ranks of the real NCCL on one device, which NCCL refuses, so every call,
the TP pairs' too, crosses hetccl's border. With four GPUs (or two,
rank r on GPU r % n, each group's ranks on different GPUs) pass
--groups a,a,b,b: the TP pairs are then inside a group, on NCCL, and the DP
pairs across.
Prints "torch_fsdp2_subgroups: ok" and exits 0 when every layout passed.
"""
import argparse
import os
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from gpu_ranks import free_port

VOCAB, SEQ, DIM, HEADS, BATCH, STEPS = 64, 16, 32, 4, 16, 10
TOL = 1e-5


class Block(nn.Module):
    """Attention and MLP; the norms have no weights, so that under tensor parallel every parameter is a DTensor
    of the TP mesh (FSDP2 on a mesh with a parent refuses plain parameters)."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(DIM, DIM) for _ in range(4))
        self.w1, self.w2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, s, _ = x.shape
        h = F.layer_norm(x, (DIM, ))
        # -1: the heads this rank holds (all of them, or HEADS / tp under tensor parallel)
        q, k, v = (f(h).view(b, s, -1, DIM // HEADS).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        return x + self.w2(F.gelu(self.w1(F.layer_norm(x, (DIM, )))))


class Model(nn.Module):

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.register_buffer("pos", torch.randn(SEQ, DIM) * 0.1)  # fixed positions: a buffer, not sharded
        self.block = Block()
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        return self.head(self.block(self.emb(tokens) + self.pos))


def new_model(dev):
    torch.manual_seed(0)
    return Model().to(dev)


def data(dev):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g).to(dev) for _ in range(STEPS)]


def loss_of(model, batch):
    return F.cross_entropy(model(batch[:, :-1]).reshape(-1, VOCAB), batch[:, 1:].reshape(-1))


def reference(dev):
    model = new_model(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    out = []
    for batch in data(dev):
        loss = loss_of(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def train(model, dp_rank, dp_size, dp_group, dev):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    per = BATCH // dp_size
    out = []
    for batch in data(dev):
        loss = loss_of(model, batch[dp_rank * per:(dp_rank + 1) * per])
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = loss.detach().reshape(1).clone()
        dist.all_reduce(t, group=dp_group)
        out.append(t.item() / dp_size)
    return out


def fully_shard(module, mesh):
    from torch.distributed.fsdp import fully_shard as shard  # public from torch 2.6
    return shard(module, mesh=mesh)


def layout_fsdp(rank, world, dev):
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (world, ), mesh_dim_names=("dp", ))
    model = new_model(dev)
    fully_shard(model.block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return train(model, rank, world, mesh.get_group("dp"), dev)


def layout_2d(rank, world, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh("cuda", (2, world // 2), mesh_dim_names=("dp", "tp"))
    model = new_model(dev)
    # every parameter a DTensor of the TP mesh: the embedding's rows and the head's split too, their outputs whole
    plan = {"emb": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
            "head": ColwiseParallel(output_layouts=Replicate())}
    for name in ("q", "k", "v", "w1"):
        plan[f"block.{name}"] = ColwiseParallel()
    for name in ("o", "w2"):
        plan[f"block.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh["tp"], plan)
    fully_shard(model.block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return train(model, mesh["dp"].get_local_rank(), 2, mesh.get_group("dp"), dev)


def split_subgroup(rank, dev, backend):
    """A subgroup by split_group (ncclCommSplit on the nccl backend; the native backend has no split): the DP
    pairs. None where it is not checked."""
    if backend != "nccl" or not hasattr(dist, "split_group"):
        return None
    g = dist.split_group(split_ranks=[[0, 2], [1, 3]])
    t = torch.full((8, ), float(rank + 1), device=dev)
    dist.all_reduce(t, group=g)
    want = float((rank % 2 + 1) + (rank % 2 + 3))
    if not bool((t == want).all()):
        raise AssertionError(f"split_group all_reduce: {t.tolist()} (want {want})")
    return f"split_group [[0, 2], [1, 3]]: all_reduce gives {want}"


def worker(rank, world, port, args, q):
    notes = []
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=args.groups[rank])
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        if args.backend == "hetccl":
            os.environ["HETCCL_DEVICE"] = "cuda"
            import hetccl_torch  # noqa: F401  registers the backend
        dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=120),
                                device_id=dev if args.backend == "nccl" else None)
        ref = reference(dev)
        for name in args.layouts:
            got = {"fsdp": layout_fsdp, "2d": layout_2d}[name](rank, world, dev)
            worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
            notes.append(f"{name}: losses {got[0]:.6f} -> {got[-1]:.6f}, largest relative difference to one "
                         f"process {worst:.3g} (tolerance {TOL:g})")
            if not worst <= TOL:
                raise AssertionError(f"{name}: losses {got} against one process {ref}")
        note = split_subgroup(rank, dev, args.backend)
        notes.append(note or f"split_group not checked (backend {args.backend}, torch {torch.__version__})")
        torch.cuda.synchronize()
        dist.destroy_process_group()
        q.put((rank, "ok", notes))
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}", notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="nccl", choices=["nccl", "hetccl"])
    ap.add_argument("--groups", default="g0,g1,g2,g3", help="hetccl group of each of the 4 ranks")
    ap.add_argument("--layouts", default="fsdp,2d")
    ap.add_argument("--deadline", type=int, default=360)  # within gpu-check.sh's 400 s a step
    args = ap.parse_args()
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 6):
        sys.exit(f"torch_fsdp2_subgroups: needs torch 2.6+ (fully_shard in torch.distributed.fsdp), this is "
                 f"{torch.__version__}")
    args.groups = args.groups.split(",")
    args.layouts = args.layouts.split(",")
    if len(args.groups) != 4:
        sys.exit("torch_fsdp2_subgroups: 4 ranks, one group name each")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))
    from spawn_ranks import spawn_and_collect
    ok = spawn_and_collect(worker, 4, (free_port(), args), args.deadline)
    print(f"torch {torch.__version__}, backend {args.backend}, groups {','.join(args.groups)}")
    print(f"torch_fsdp2_subgroups: {'ok' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
