"""torch.distributed on two GPU groups of one host (needs one NVIDIA GPU,
PyTorch with CUDA and hetccl's drop-in libnccl.so.2): two processes on GPU 0,
HETCCL_GROUP g0 and g1, standing for two vendors. The same script runs the
`nccl` backend on hetccl's drop-in (LD_PRELOAD) and torch's `gloo` backend
on CUDA tensors, in this one command, and measures:

  - all_reduce of BYTES float32 (default 256 MiB), in place, as nccl-tests
    times it (warmup, barrier, ITERS calls, slowest rank), checked once;
  - one DistributedDataParallel training step (forward, backward with the
    gradient all-reduces, SGD) of an MLP of about 101M parameters (six
    4096x4096 layers), median over STEPS steps, and the same step with the
    gradient exchange skipped (DDP's no_sync), so the communication share
    shows;
  - the pinned copy bandwidth with both directions at once (the border's
    bound, as bench/gpu_two_groups.sh: busbw bound = bidir / 2).

    python3 bench/torch_two_groups.py [--dropin BUILD/dropin/libnccl.so.2]

Prints one `torch_2groups backend=...` line per backend and
  ratio torch_2groups allreduce <bytes> hetccl_busbw=.. gloo_busbw=.. hetccl/gloo=.. bound=.. hetccl/bound=..
  ratio torch_2groups ddp_step hetccl_ms=.. gloo_ms=.. gloo/hetccl=.. hetccl_compute_ms=..
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gloo_allreduce import pinned_bandwidth  # noqa: E402
from gpu_jobs import ddp_step, run_ranks  # noqa: E402

GROUPS = ("g0", "g1")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slowest(value):
    t = torch.tensor([value], dtype=torch.float64, device="cuda:0")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def time_allreduce(nbytes, iters, warmup, rank):
    x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda:0")
    for _ in range(warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    per = slowest((time.perf_counter() - t0) / iters)
    x.fill_(rank + 1)
    dist.all_reduce(x)
    wrong = int((x != sum(r + 1 for r in range(dist.get_world_size()))).sum().item())
    w = torch.tensor([wrong], dtype=torch.int64, device="cuda:0")
    dist.all_reduce(w)
    return per, int(w.item())


def time_ddp(steps, warmup, width, layers, batch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).cuda()
    params = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device="cuda:0")
    step = ddp_step(ddp, opt, x)

    out = {}
    for name, sync in (("step", True), ("compute", False)):
        for _ in range(warmup):
            step(sync)
        torch.cuda.synchronize()
        dist.barrier()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step(sync)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        out[name] = slowest(statistics.median(times))
    # Replicas stay equal under DDP: compare a checksum of the weights.
    s = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
    both = [torch.zeros_like(s) for _ in range(dist.get_world_size())]
    dist.all_gather(both, s)
    out["replicas_equal"] = all(torch.equal(both[0], b) for b in both)
    out["params"] = params
    return out


def worker(rank, backend, port, a, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=GROUPS[rank])
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    kw = {"device_id": dev} if backend == "nccl" else {}
    dist.init_process_group(backend, rank=rank, world_size=2, **kw)
    if backend == "nccl":
        with open("/proc/self/maps") as f:
            if os.path.realpath(a.dropin) not in f.read():
                raise SystemExit("hetccl's drop-in is not loaded in this process (LD_PRELOAD)")
    per, wrong = time_allreduce(a.bytes, a.iters, a.warmup, rank)
    ddp = time_ddp(a.steps, 3, a.width, a.layers, a.batch)
    if rank == 0:
        q.put((per, wrong, ddp))
    dist.barrier()
    dist.destroy_process_group()


def run(backend, a):
    env = {}
    if backend == "nccl":
        env["LD_PRELOAD"] = a.dropin + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else "")
        env["NCCL_NVLS_ENABLE"] = os.environ.get("NCCL_NVLS_ENABLE", "0")
    port = free_port()
    return run_ranks(worker, lambda r: (r, backend, port, a), env, a.timeout)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--dropin", default=os.path.join(here, "..", "build", "dropin", "libnccl.so.2"))
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    a.dropin = os.path.realpath(a.dropin)
    if not os.path.exists(a.dropin):
        raise SystemExit(f"no drop-in at {a.dropin} (build it, or pass --dropin)")
    res = {}
    for name, backend in (("hetccl", "nccl"), ("gloo", "gloo")):
        per, wrong, ddp = run(backend, a)
        algbw = a.bytes / per / 1e9
        res[name] = dict(busbw=algbw, wrong=wrong, **ddp)  # two ranks: busbw = algbw
        print(f"torch_2groups backend={name} allreduce_bytes={a.bytes} time_us={per * 1e6:.1f} busbw={algbw:.2f} "
              f"wrong={wrong} ddp_params={ddp['params']} ddp_step_ms={ddp['step'] * 1e3:.2f} "
              f"ddp_compute_ms={ddp['compute'] * 1e3:.2f} replicas_equal={ddp['replicas_equal']}", flush=True)
    bw = pinned_bandwidth(a.bytes)
    bound = bw["bidir"] / 2
    h, g = res["hetccl"], res["gloo"]
    print(f"ratio torch_2groups allreduce {a.bytes} hetccl_busbw={h['busbw']:.2f} gloo_busbw={g['busbw']:.2f} "
          f"hetccl/gloo={h['busbw'] / g['busbw']:.2f} bound={bound:.1f} hetccl/bound={h['busbw'] / bound:.3f}")
    print(f"ratio torch_2groups ddp_step hetccl_ms={h['step'] * 1e3:.2f} gloo_ms={g['step'] * 1e3:.2f} "
          f"gloo/hetccl={g['step'] / h['step']:.2f} hetccl_compute_ms={h['compute'] * 1e3:.2f}")
    bad = [n for n, r in res.items() if r["wrong"] or not r["replicas_equal"]]
    if bad:
        raise SystemExit(f"wrong results from {bad}")


if __name__ == "__main__":
    main()
