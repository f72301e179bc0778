"""Unmodified torch.distributed ("nccl" backend) on hetccl's libnccl.so.2:
two processes on one GPU, each its own group (g0, g1; the real NCCL would
refuse two ranks on one GPU), so every collective crosses hetccl's border.
Checks every c10d collective the nccl backend offers and one DDP step.

    hetccl-torch-run python3 tests/gpu/torch_dropin.py
Prints "torch_dropin: ok" and exits 0 when every check passed.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def worker(rank, world, port, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=f"g{rank}")
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", rank=rank, world_size=world)
        maps = open("/proc/self/maps").read()
        check("dropin/libnccl.so.2" in maps or "hetccl-dropin" in maps, "hetccl's libnccl.so.2 is not loaded")
        dev = torch.device("cuda:0")
        n = 1 << 20
        x = torch.arange(n, dtype=torch.float32, device=dev) + rank
        dist.all_reduce(x)
        want = 2 * torch.arange(n, dtype=torch.float32, device=dev) + 1
        check(torch.equal(x, want), "all_reduce sum")
        y = torch.full((1000,), float(rank + 1), device=dev, dtype=torch.bfloat16)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        check(bool((y == 2).all()), "all_reduce max bf16")
        z = torch.full((77,), float(rank + 1), device=dev)
        dist.all_reduce(z, op=dist.ReduceOp.AVG)
        check(bool((z == 1.5).all()), "all_reduce avg")
        b = torch.arange(4096, device=dev, dtype=torch.int64) * (rank + 7)
        dist.broadcast(b, src=1)
        check(torch.equal(b, torch.arange(4096, device=dev, dtype=torch.int64) * 8), "broadcast")
        part = torch.full((333,), rank, device=dev, dtype=torch.int32)
        out = torch.empty(666, device=dev, dtype=torch.int32)
        dist.all_gather_into_tensor(out, part)
        check(bool((out[:333] == 0).all() and (out[333:] == 1).all()), "all_gather_into_tensor")
        big = torch.arange(2 * 500, device=dev, dtype=torch.float32) * (rank + 1)
        red = torch.empty(500, device=dev)
        dist.reduce_scatter_tensor(red, big)
        want = (torch.arange(500, device=dev, dtype=torch.float32) + 500 * rank) * 3  # sum of (r+1) * i over r
        check(torch.equal(red, want), "reduce_scatter_tensor")
        a2a_in = torch.arange(4, device=dev, dtype=torch.float32) + 10 * rank
        a2a_out = torch.empty(4, device=dev)
        dist.all_to_all_single(a2a_out, a2a_in)
        check(a2a_out.tolist() == [2.0 * rank, 2.0 * rank + 1, 10.0 + 2 * rank, 11.0 + 2 * rank],
              f"all_to_all_single {a2a_out.tolist()}")
        if rank == 0:
            dist.send(torch.full((5,), 3.5, device=dev), dst=1)
        else:
            r = torch.empty(5, device=dev)
            dist.recv(r, src=0)
            check(bool((r == 3.5).all()), "send/recv")
        # One DDP step: gradients averaged across the two ranks.
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 8).to(dev)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
        inp = torch.full((4, 64), float(rank + 1), device=dev)
        ddp(inp).sum().backward()
        g = model.weight.grad.clone()
        gs = [torch.empty_like(g) for _ in range(world)]
        dist.all_gather(gs, g)
        check(torch.equal(gs[0], gs[1]), "DDP gradients differ across ranks")
        check(torch.allclose(g, torch.full_like(g, 4 * 1.5)), f"DDP gradient value {g[0, 0].item()}")
        dist.barrier()
        torch.cuda.synchronize()
        q.put((rank, "ok", torch.cuda.nccl.version()))
        dist.destroy_process_group()
    except Exception as e:  # report, do not hang the parent
        q.put((rank, f"FAILED: {type(e).__name__}: {e}", None))


def main():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, 2, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(q.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    ok = all(r[1] == "ok" for r in results)
    for r in results:
        print(f"rank {r[0]}: {r[1]} (torch sees NCCL version {r[2]})")
    print("torch_dropin: ok" if ok else "torch_dropin: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
