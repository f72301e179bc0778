"""GPU peer for bench/gpu_border_vs_gloo.sh: float32 sum AllReduce through
torch.distributed's gloo backend on the same layout hetccl-perf measures
(the first --cuda-ranks ranks, default 1, hold CUDA tensors on GPU 0, the
others CPU tensors), timed like nccl-tests (warmup, barrier, ITERS calls,
time per call, slowest rank). It also measures the pinned host <-> device
copy bandwidth of GPU 0, one way and with both directions at once (the
ceiling of any border step that goes through host memory).

    python3 gpu_gloo_allreduce.py --np 4 --bytes 268435456 --iters 5 --warmup 2
    python3 gpu_gloo_allreduce.py --np 2 --cuda-ranks 2 --bytes 268435456

Prints:  gloo_allreduce bytes=B time_us=T algbw=A busbw=B wrong=W
         pinned_copy h2d_GBps=X d2h_GBps=Y bidir_GBps=Z (each way)
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned_bandwidth(nbytes):
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    out = {}
    for name, dst, src in (("h2d", dev, host), ("d2h", host, dev)):
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        out[name] = 5 * nbytes / (time.perf_counter() - t0) / 1e9
    # Both directions at once, on two streams: what each way gets then.
    host2 = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev2 = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        with torch.cuda.stream(s1):
            dev.copy_(host, non_blocking=True)
        with torch.cuda.stream(s2):
            host2.copy_(dev2, non_blocking=True)
    torch.cuda.synchronize()
    out["bidir"] = 5 * nbytes / (time.perf_counter() - t0) / 1e9
    return out


def worker(rank, nranks, cuda_ranks, port, nbytes, iters, warmup, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=nranks)
    device = "cuda:0" if rank < cuda_ranks else "cpu"
    count = nbytes // 4
    index = torch.arange(count, dtype=torch.int32)
    base = ((index + rank) % 7).to(torch.float32).to(device)
    buf = base.clone()
    for _ in range(warmup):
        dist.all_reduce(buf)
    if rank < cuda_ranks:
        torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    if rank < cuda_ranks:
        torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / iters
    t = torch.tensor([per], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    # Check one call from fresh inputs: sum over ranks of (i + r) % 7.
    buf = base.clone()
    dist.all_reduce(buf)
    want = sum(((index + r) % 7).to(torch.float32) for r in range(nranks))
    wrong = int((buf.cpu() != want).sum())
    w = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(w)
    if rank == 0:
        queue.put((t.item(), int(w.item())))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--cuda-ranks", type=int, default=1)
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a.np, a.cuda_ranks, port, a.bytes, a.iters, a.warmup, q)) for r in range(a.np)]
    for p in procs:
        p.start()
    per, wrong = q.get(timeout=1800)
    for p in procs:
        p.join()
    algbw = a.bytes / per / 1e9
    busbw = algbw * 2 * (a.np - 1) / a.np
    print(f"gloo_allreduce bytes={a.bytes} time_us={per * 1e6:.1f} algbw={algbw:.3f} busbw={busbw:.3f} wrong={wrong}")
    bw = pinned_bandwidth(a.bytes)
    print(f"pinned_copy h2d_GBps={bw['h2d']:.2f} d2h_GBps={bw['d2h']:.2f} bidir_GBps={bw['bidir']:.2f}")


if __name__ == "__main__":
    main()
