"""Whether a collective across two GPU groups runs beside the ranks' compute
(needs one NVIDIA GPU, PyTorch with CUDA and hetccl's drop-in libnccl.so.2):
two processes on GPU 0, HETCCL_GROUP g0 and g1, torch's `nccl` backend on
the drop-in (LD_PRELOAD), as the GPUs of two vendors would run one job.
Each process, both at once:

  - coll: one all_reduce of BYTES float32 (default 128 MiB, async_op), waited;
  - mm: a chain of fp32 matmuls (4096x2048 by 2048x2048) sized to about
    MM_MS milliseconds (default 16) while both processes run it;
  - both: the all_reduce issued, then the matmuls on the current stream,
    then the wait: the exchange should hide behind the compute;
  - copies and copies+mm: the same bytes copied to pinned memory and back
    on a side stream (what the collective moves over the link), alone and
    beside the matmuls: the reference for what the GPU can overlap;
  - call_us: the host time of the all_reduce call (the Python thread that
    should be launching the next layer's backward), and call_nccl_us, the
    same call on a group of this rank alone (the drop-in hands it to NCCL):
    what torch and NCCL themselves cost a call;
  - a DistributedDataParallel step of an 8-layer 2048-wide MLP (33.6M
    parameters, fp32) at BATCH rows per rank, with and without the gradient
    exchange (DDP's no_sync);
  - an 8-byte all_reduce (us a call) and a 256 MiB one (busbw), so that a
    change that hides the exchange is seen not to slow it.

It runs each VARIANT (hetccl settings) in each MODE: `sliced` (the two
processes as they are: two contexts the GPU time-slices) and `mps` (under
CUDA MPS with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 each: one shared context,
half the SMs each, as two GPUs of their own would run). Prints two lines per
mode and variant, the times (ms, us) and the ratios:

  ratio gpu_overlap_ms MODE VARIANT coll_ms=.. mm_ms=.. both_ms=.. copies_ms=.. copies_both_ms=.. ...
  ratio gpu_overlap MODE VARIANT both/longer=.. copies_both/longer=.. both/sum=.. ddp_sync/nosync=..
        call_us=.. call_nccl_us=.. small_us=.. busbw256=..

    python3 bench/gpu_overlap.py [--dropin BUILD/dropin/libnccl.so.2] [--modes sliced,mps]
                                 [--variant NAME:VAR=VALUE,...]...

Without --variant: `default` (the build's defaults: hetccl's streams at the
device's greatest priority, and 32 hardware queues, which hetccl asks CUDA
for when it is loaded), `queues8` (HETCCL_CUDA_CONNECTIONS=0: the runtime's
8 hardware queues, where a stream that shares one with the border's waiting
streams waits with them) and `normal` (hetccl's streams at the default
priority: HETCCL_GPU_STREAM_PRIORITY=default).
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
from gpu_jobs import Mps, ddp_step, run_ranks  # noqa: E402

GROUPS = ("g0", "g1")
DEFAULT_VARIANTS = [
    ("default", {}),
    ("queues8", {"HETCCL_CUDA_CONNECTIONS": "0"}),
    ("normal", {"HETCCL_GPU_STREAM_PRIORITY": "default"}),
]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """CPU-side barrier and slowest-rank reduction (a gloo group), so that
    lining the ranks up puts nothing on the GPU."""

    def __init__(self):
        self.cpu = dist.new_group(backend="gloo")

    def barrier(self):
        dist.barrier(group=self.cpu)

    def slowest(self, value):
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.cpu)
        return t.item()


def timed(ranks, fn, iters):
    """Median seconds of fn() to the device's end, both ranks started together; the slowest rank's."""
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        ranks.barrier()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return ranks.slowest(statistics.median(times))


def overlap(ranks, a):
    dev = torch.device("cuda", 0)
    x = torch.ones(a.bytes // 4, dtype=torch.float32, device=dev)
    pinned = torch.empty_like(x, device="cpu").pin_memory()
    back = torch.empty_like(x)
    side = torch.cuda.Stream()
    m_a = torch.randn(4096, 2048, device=dev)
    m_b = torch.randn(2048, 2048, device=dev)
    m_c = torch.empty(4096, 2048, device=dev)

    def matmuls(k):
        for _ in range(k):
            torch.matmul(m_a, m_b, out=m_c)

    # Calibrate: the matmul's time with both ranks running them.
    matmuls(4)
    per = timed(ranks, lambda: matmuls(20), 3) / 20
    k = max(1, round(a.mm_ms / 1e3 / per))
    calls = []

    def coll():
        dist.all_reduce(x, async_op=True).wait()

    def both():
        t0 = time.perf_counter()
        w = dist.all_reduce(x, async_op=True)
        calls.append(time.perf_counter() - t0)
        matmuls(k)
        w.wait()

    def copies():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            pinned.copy_(x, non_blocking=True)
            back.copy_(pinned, non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)

    def copies_both():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            pinned.copy_(x, non_blocking=True)
            back.copy_(pinned, non_blocking=True)
        matmuls(k)
        torch.cuda.current_stream().wait_stream(side)

    for f in (coll, both, copies, copies_both):  # warm up
        f()
    out = {"mm_kernels": k}
    for name, f in (("coll", coll), ("mm", lambda: matmuls(k)), ("both", both), ("copies", copies),
                    ("copies_both", copies_both)):
        out[name] = timed(ranks, f, a.iters)
    calls.clear()
    for _ in range(a.iters):
        both()
    torch.cuda.synchronize()
    out["call_us"] = ranks.slowest(statistics.median(calls)) * 1e6
    # The same call on a group of this rank alone: torch's and NCCL's own cost.
    alone = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]
    solo = []
    for i in range(a.iters + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        w = dist.all_reduce(x, group=alone, async_op=True)
        if i >= 2:
            solo.append(time.perf_counter() - t0)
        matmuls(k)
        w.wait()
    torch.cuda.synchronize()
    out["call_nccl_us"] = ranks.slowest(statistics.median(solo)) * 1e6
    # The result is right: every element the sum of the ranks' values.
    x.fill_(dist.get_rank() + 1)
    dist.all_reduce(x)
    want = sum(r + 1 for r in range(dist.get_world_size()))
    out["wrong"] = int(ranks.slowest(float((x != want).sum().item())))
    return out


def calls_alone(ranks, a):
    dev = torch.device("cuda", 0)
    small = torch.ones(2, dtype=torch.float32, device=dev)  # 8 bytes
    big = torch.ones((256 << 20) // 4, dtype=torch.float32, device=dev)
    n = a.small_iters
    for _ in range(20):
        dist.all_reduce(small)
    small_s = timed(ranks, lambda: [dist.all_reduce(small) for _ in range(n)], 3) / n
    dist.all_reduce(big)
    big_s = timed(ranks, lambda: [dist.all_reduce(big) for _ in range(5)], 2) / 5
    return {"small_us": small_s * 1e6, "busbw256": (256 << 20) / big_s / 1e9}  # two ranks: busbw = algbw


def ddp_steps(ranks, a):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    x = torch.randn(a.batch, 2048, device="cuda:0")
    step = ddp_step(ddp, opt, x)

    out = {"params": sum(p.numel() for p in model.parameters())}
    for name, sync in (("ddp_sync", True), ("ddp_nosync", False)):
        for _ in range(3):
            step(sync)
        out[name] = timed(ranks, lambda s=sync: step(s), a.steps)
    return out


def worker(rank, port, a, env, q):
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=GROUPS[rank])
    torch.cuda.set_device(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", 0))
    with open("/proc/self/maps") as f:
        if a.dropin not in f.read():
            raise SystemExit("hetccl's drop-in is not loaded in this process (LD_PRELOAD)")
    ranks = Ranks()
    res = overlap(ranks, a)
    res.update(calls_alone(ranks, a))
    res.update(ddp_steps(ranks, a))
    if rank == 0:
        q.put(res)
    ranks.barrier()
    dist.destroy_process_group()


def run(a, env):
    child = dict(env)
    child["LD_PRELOAD"] = a.dropin + (":" + os.environ["LD_PRELOAD"] if os.environ.get("LD_PRELOAD") else "")
    child.setdefault("NCCL_NVLS_ENABLE", "0")
    child.setdefault("HETCCL_TIMEOUT_S", "60")  # a stall fails the run within the timeout below
    port = free_port()
    # CUDA_DEVICE_MAX_CONNECTIONS: what hetccl sets where the variant sets none.
    unset = () if "CUDA_DEVICE_MAX_CONNECTIONS" in env else ("CUDA_DEVICE_MAX_CONNECTIONS",)
    return run_ranks(worker, lambda r: (r, port, a, child), child, a.timeout, unset=unset)


def report(mode, name, r):
    longer = max(r["coll"], r["mm"])
    print(f"ratio gpu_overlap_ms {mode} {name} coll_ms={r['coll'] * 1e3:.2f} mm_ms={r['mm'] * 1e3:.2f} "
          f"both_ms={r['both'] * 1e3:.2f} copies_ms={r['copies'] * 1e3:.2f} "
          f"copies_both_ms={r['copies_both'] * 1e3:.2f} mm_kernels={r['mm_kernels']} call_us={r['call_us']:.1f} "
          f"call_nccl_us={r['call_nccl_us']:.1f} "
          f"ddp_sync_ms={r['ddp_sync'] * 1e3:.2f} ddp_nosync_ms={r['ddp_nosync'] * 1e3:.2f} "
          f"ddp_params={r['params']} small_us={r['small_us']:.1f} busbw256={r['busbw256']:.2f} wrong={r['wrong']}",
          flush=True)
    print(f"ratio gpu_overlap {mode} {name} both/longer={r['both'] / longer:.3f} "
          f"copies_both/longer={r['copies_both'] / max(r['copies'], r['mm']):.3f} "
          f"both/sum={r['both'] / (r['coll'] + r['mm']):.3f} ddp_sync/nosync={r['ddp_sync'] / r['ddp_nosync']:.3f} "
          f"call_us={r['call_us']:.1f} call_nccl_us={r['call_nccl_us']:.1f} small_us={r['small_us']:.1f} "
          f"busbw256={r['busbw256']:.2f}", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--dropin", default=os.path.join(here, "..", "build", "dropin", "libnccl.so.2"))
    ap.add_argument("--modes", default="sliced,mps")
    ap.add_argument("--variant", action="append", default=[], help="NAME:VAR=VALUE,... (repeatable)")
    ap.add_argument("--bytes", type=int, default=128 << 20)
    ap.add_argument("--mm-ms", type=float, default=16)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--small-iters", type=int, default=200)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--batch", type=int, default=2048, help="rows per rank (the global batch is twice this)")
    ap.add_argument("--timeout", type=float, default=150)
    a = ap.parse_args()
    a.dropin = os.path.realpath(a.dropin)
    if not os.path.exists(a.dropin):
        raise SystemExit(f"no drop-in at {a.dropin} (build it, or pass --dropin)")
    variants = []
    for v in a.variant:
        name, _, settings = v.partition(":")
        variants.append((name, dict(kv.split("=", 1) for kv in settings.split(",") if kv)))
    variants = variants or DEFAULT_VARIANTS
    bad = []
    for mode in a.modes.split(","):
        for name, env in variants:
            if mode == "mps":
                with Mps("overlap") as m:
                    r = run(a, {**env, **m.env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"})
            elif mode == "sliced":
                r = run(a, env)
            else:
                raise SystemExit(f"unknown mode {mode} (sliced, mps)")
            report(mode, name, r)
            if r["wrong"]:
                bad.append(f"{mode}/{name}")
    if bad:
        raise SystemExit(f"wrong all_reduce results in {bad}")


if __name__ == "__main__":
    main()
