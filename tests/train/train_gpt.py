"""A small GPT-style language model trained with DDP: the one script behind
hetccl's training comparisons (docs/training). Every run uses the same data,
seeds and global batch; only the process layout and the backend change:

    # (a) one process, plain NCCL
    python3 train_gpt.py --backend nccl --devices cuda --out a.csv
    # (b) two processes on one GPU, in two hetccl groups, through the drop-in libnccl.so.2
    hetccl-torch-run python3 train_gpt.py --backend nccl --devices cuda,cuda --groups g0,g1 --out b.csv
    # (c) the same two processes on torch's gloo
    python3 train_gpt.py --backend gloo --devices cuda,cuda --out c.csv
    # (d) hetccl's native backend, a CUDA rank and a CPU rank
    python3 train_gpt.py --backend hetccl --devices cuda,host --out d.csv

The tokens come from a fixed random order-2 Markov chain (seeded), so the
loss has something to learn and every run sees the same batches. Rank r of
W trains on rows [r*B/W, (r+1)*B/W) of each global batch of B sequences;
the logged loss is the global-batch mean (an all_reduce over the ranks).
Rank 0 writes step,loss,step_seconds rows to --out.
"""
import argparse
import math
import os
import socket
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))
from spawn_ranks import collect  # noqa: E402


def make_tokens(steps, batch, seq, vocab, seed):
    """(steps, batch, seq+1) int64 tokens of a sparse random order-2 Markov chain."""
    g = torch.Generator().manual_seed(seed)
    # each (prev2, prev1) context allows 4 next tokens with skewed weights
    nxt = torch.randint(0, vocab, (vocab, vocab, 4), generator=g)
    weights = torch.tensor([0.55, 0.25, 0.15, 0.05])
    out = torch.empty(steps * batch, seq + 1, dtype=torch.int64)
    out[:, 0] = torch.randint(0, vocab, (steps * batch,), generator=g)
    out[:, 1] = torch.randint(0, vocab, (steps * batch,), generator=g)
    for t in range(2, seq + 1):
        pick = torch.multinomial(weights, steps * batch, replacement=True, generator=g)
        out[:, t] = nxt[out[:, t - 2], out[:, t - 1], pick]
    return out.view(steps, batch, seq + 1)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, layers, heads):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos[:, : idx.shape[1]])))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(rank, args, port, q):
    try:
        world = len(args.devices)
        kind = args.devices[rank]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_DEVICE=kind,
                          HETCCL_GROUP=args.groups[rank], NCCL_NVLS_ENABLE="0")
        if kind == "cuda":
            torch.cuda.set_device(0)
            torch.backends.cuda.matmul.allow_tf32 = False  # the same arithmetic on every layout
            torch.backends.cudnn.allow_tf32 = False
        dev = torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")
        torch.set_num_threads(max(1, args.threads))
        if args.backend == "hetccl":
            import hetccl_torch  # noqa: F401  registers the backend
        dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout))
        data = make_tokens(args.steps, args.batch, args.seq, args.vocab, seed=1234)
        torch.manual_seed(0)
        model = GPT(args.vocab, args.seq, args.dim, args.layers, args.heads).to(dev)
        params = sum(p.numel() for p in model.parameters())
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[0] if kind == "cuda" else None,
                                                  bucket_cap_mb=args.bucket_mb)
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        per = args.batch // world
        rows = []
        for step in range(args.steps):
            t0 = time.perf_counter()
            batch = data[step, rank * per:(rank + 1) * per].to(dev)
            logits = ddp(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            logged = loss.detach().clone().reshape(1)
            dist.all_reduce(logged)  # global-batch mean: the ranks' halves are equal in size
            value = logged.item() / world  # .item() waits for the step
            rows.append((step, value, time.perf_counter() - t0))
        dist.barrier()
        dist.destroy_process_group()
        q.put((rank, "ok", rows, params))
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}", None, 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", required=True, choices=["nccl", "gloo", "hetccl"])
    ap.add_argument("--devices", default="cuda", help="kind of each rank, comma-separated: cuda or host")
    ap.add_argument("--groups", default="", help="hetccl group of each rank (default: g0,g1,...)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=32, help="global batch (sequences)")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--threads", type=int, default=4, help="torch CPU threads per process")
    ap.add_argument("--timeout", type=int, default=300, help="process group timeout, seconds")
    ap.add_argument("--deadline", type=int, default=1800, help="give up on the ranks after this many seconds")
    ap.add_argument("--out", required=True, help="CSV of step,loss,step_seconds")
    args = ap.parse_args()
    args.devices = args.devices.split(",")
    world = len(args.devices)
    args.groups = args.groups.split(",") if args.groups else [f"g{r}" for r in range(world)]
    if len(args.groups) != world or args.batch % world:
        sys.exit("train_gpt: --groups needs one name per rank, and --batch must divide by the rank count")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=train, args=(r, args, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = [r if len(r) == 4 else (r[0], r[1], None, 0) for r in collect(procs, q, args.deadline)]
    bad = [r for r in results if r[1] != "ok"]
    for r in bad:
        print(f"rank {r[0]}: {r[1]}", file=sys.stderr)
    if bad or len(results) != world:
        sys.exit(1)
    rows, params = next((r[2], r[3]) for r in results if r[0] == 0)
    with open(args.out, "w") as f:
        f.write("step,loss,step_seconds\n")
        for step, loss, secs in rows:
            f.write(f"{step},{loss:.9g},{secs:.6f}\n")
    steady = sorted(s for _, _, s in rows[len(rows) // 5:])
    print(f"train_gpt: {args.backend} on {','.join(args.devices)}: {params / 1e6:.2f} M parameters, "
          f"loss {rows[0][1]:.4f} -> {rows[-1][1]:.4f}, median step {1e3 * steady[len(steady) // 2]:.2f} ms "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
