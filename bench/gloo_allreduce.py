"""Gloo peer for bench/allreduce_vs_peers.sh: float32 sum AllReduce through
torch.distributed (backend "gloo", TCP over loopback), timed like
nccl-tests (warmup, barrier, n timed calls, time per call), reporting the
slowest rank's time.

    /usr/bin/python3 gloo_allreduce.py --np 4 --sizes 8:20:5,4194304:20:5 [--json FILE]

Each --sizes entry is BYTES:ITERS:WARMUP. BYTES is rounded down to a
multiple of 4. algbw = bytes/time, busbw = algbw*2(n-1)/n, GB = 1e9.
dist.all_reduce only works in place, so unlike the other two this peer is
in-place: the timed loop reduces the same tensor again and again (its values
grow, up to inf after ~60 calls; that does not change the cost on x86).
#wrong is counted on one extra call from fresh inputs after the timed loop.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_sizes(arg):
    specs = []
    for item in arg.split(","):
        b, it, wu = (int(x) for x in item.split(":"))
        if b < 4 or it < 1 or wu < 0:
            raise ValueError(item)
        specs.append((b - b % 4, it, wu))
    return specs


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, nranks, port, specs, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    # One compute thread per rank, like an MPI rank; 4 ranks already share 2 cores.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=nranks)
    rows = []
    for nbytes, iters, warmup in specs:
        count = nbytes // 4
        index = torch.arange(count, dtype=torch.int32)
        base = ((index + rank) % 7).to(torch.float32)
        buf = base.clone()
        for _ in range(warmup):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        per_call = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(per_call, op=dist.ReduceOp.MAX)

        # Correctness: one more call on fresh inputs (values stay exact in float32).
        buf.copy_(base)
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        table = torch.tensor([float(sum((k + r) % 7 for r in range(nranks))) for k in range(7)])
        wrong = torch.tensor([int((buf != table[(index % 7).long()]).sum())], dtype=torch.int64)
        dist.all_reduce(wrong, op=dist.ReduceOp.SUM)

        if rank == 0:
            secs = float(per_call[0])
            algbw = nbytes / secs / 1e9
            busbw = algbw * 2 * (nranks - 1) / nranks
            # Key "ip": torch's all_reduce is in-place (see the module docstring).
            row = {"bytes": nbytes, "count": count, "iters": iters, "warmup": warmup,
                   "ip": {"time_us": secs * 1e6, "algbw": algbw, "busbw": busbw,
                           "wrong": int(wrong[0])}}
            rows.append(row)
            print(f"  {nbytes:12d} {count:12d} {iters:6d} {warmup:6d} {secs * 1e6:12.2f} "
                  f"{algbw:10.4f} {busbw:10.4f} {int(wrong[0]):8d}", flush=True)
    dist.destroy_process_group()
    if rank == 0:
        queue.put(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--sizes", required=True, help="BYTES:ITERS:WARMUP[,...]")
    ap.add_argument("--json")
    args = ap.parse_args()
    specs = parse_sizes(args.sizes)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")

    print(f"# gloo_allreduce: {args.np} ranks, float sum, torch {torch.__version__} "
          f"gloo over {os.environ['GLOO_SOCKET_IFNAME']}")
    print(f"# {'size(B)':>12} {'count':>12} {'iters':>6} {'warm':>6} {'time(us)':>12} "
          f"{'algbw':>10} {'busbw':>10} {'#wrong':>8}", flush=True)
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(worker, args=(args.np, free_port(), specs, queue), nprocs=args.np,
                       join=True, start_method="spawn")
    rows = queue.get()
    avg = sum(r["ip"]["busbw"] for r in rows) / len(rows)
    print(f"# Avg bus bandwidth : {avg:.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"op": "allreduce", "dtype": "float32", "nranks": args.np,
                       "backend": "gloo", "torch": torch.__version__, "rows": rows,
                       "avg_busbw": avg}, f)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
