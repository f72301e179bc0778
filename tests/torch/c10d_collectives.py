"""Every c10d call of the native "hetccl" backend against known results.

    python3 tests/torch/c10d_collectives.py --devices host,host,host --groups a,b,b
    python3 tests/torch/c10d_collectives.py --devices cuda,host        (a GPU rank and a CPU rank)

Each rank is one process; --devices gives each rank's kind (cuda: tensors on
the GPU, host: CPU tensors), --groups each rank's hetccl group. Also checks
that bad input raises a clear error and that a DDP step agrees with the
arithmetic. Prints "c10d_collectives: ok" and exits 0 when all passed.
hetccl_torch must be importable (pip install --no-build-isolation ./python,
or PYTHONPATH=python after an in-place build).
"""
import argparse
import faulthandler
import os
import socket
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))
from spawn_ranks import collect  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROGRESS = {"rank": -1}


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    if os.environ.get("C10D_TEST_VERBOSE"):
        print(f"rank {PROGRESS['rank']}: passed {what}", file=sys.stderr, flush=True)


def expect_error(fn, words, what):
    try:
        fn()
    except Exception as e:  # torch raises RuntimeError or ValueError
        msg = str(e)
        if not all(w in msg for w in words):
            raise AssertionError(f"{what}: error text {msg!r} lacks {words}")
        check(True, f"{what} (error: {msg[:120]!r})")
        return
    raise AssertionError(f"{what}: no error raised")


def run_checks(rank, world, dev):
    import hetccl_torch
    n = 1 << 16
    # allreduce: every op, several dtypes
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16):
        x = (torch.arange(n, device=dev) % 7 + rank + 1).to(dt)
        dist.all_reduce(x)
        want = (torch.arange(n, device=dev) % 7 * world + world * (world + 1) // 2).to(dt)
        check(torch.equal(x, want), f"all_reduce sum {dt}")
    x = torch.full((1000,), float(rank + 1), device=dev)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    check(bool((x == world).all()), "all_reduce max")
    x = torch.full((1000,), float(rank + 1), device=dev)
    dist.all_reduce(x, op=dist.ReduceOp.MIN)
    check(bool((x == 1).all()), "all_reduce min")
    x = torch.full((10,), float(rank + 2), device=dev, dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
    want = 1.0
    for r in range(world):
        want *= r + 2
    check(bool((x == want).all()), "all_reduce product")
    if hasattr(dist.ReduceOp, "AVG"):
        x = torch.full((33,), float(rank), device=dev)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        check(torch.allclose(x, torch.full_like(x, (world - 1) / 2)), "all_reduce avg")
    b = torch.tensor([rank == 0, False, True], device=dev)
    dist.all_reduce(b)  # logical or
    check(b.tolist() == [True, False, True], f"all_reduce bool {b.tolist()}")
    c = torch.full((8,), complex(rank, 1), device=dev, dtype=torch.complex64)
    dist.all_reduce(c)
    check(bool((c == complex(world * (world - 1) / 2, world)).all()), "all_reduce complex")
    # async work and its future
    x = torch.ones(4096, device=dev)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future()
    work.wait()
    check(bool((x == world).all()), "async all_reduce")
    check(bool((fut.wait()[0] == world).all()), "all_reduce future value")
    # broadcast from every root, odd sizes, odd dtypes
    for root in range(world):
        t = torch.arange(1001, device=dev, dtype=torch.int16) * (rank + 1)
        dist.broadcast(t, src=root)
        check(torch.equal(t, torch.arange(1001, device=dev, dtype=torch.int16) * (root + 1)), f"broadcast {root}")
    # reduce
    t = torch.full((300,), float(rank + 1), device=dev)
    dist.reduce(t, dst=world - 1)
    if rank == world - 1:
        check(bool((t == world * (world + 1) / 2).all()), "reduce")
    # all_gather (list) and into one tensor
    part = torch.full((257,), rank, device=dev, dtype=torch.int32)
    outs = [torch.empty(257, device=dev, dtype=torch.int32) for _ in range(world)]
    dist.all_gather(outs, part)
    check(all(bool((o == r).all()) for r, o in enumerate(outs)), "all_gather")
    if hasattr(dist, "all_gather_into_tensor"):
        flat = torch.empty(257 * world, device=dev, dtype=torch.int32)
        dist.all_gather_into_tensor(flat, part)
        check(all(bool((flat[r * 257:(r + 1) * 257] == r).all()) for r in range(world)), "all_gather_into_tensor")
    # reduce_scatter (list and tensor)
    ins = [torch.full((100,), float(rank + r), device=dev) for r in range(world)]
    out = torch.empty(100, device=dev)
    dist.reduce_scatter(out, ins)
    check(bool((out == sum(q + rank for q in range(world))).all()), "reduce_scatter")
    if hasattr(dist, "reduce_scatter_tensor"):
        big = torch.cat(ins)
        out2 = torch.empty(100, device=dev)
        dist.reduce_scatter_tensor(out2, big)
        check(torch.equal(out, out2), "reduce_scatter_tensor")
    # gather and scatter
    g = [torch.empty(50, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((50,), float(rank), device=dev), gather_list=g, dst=0)
    if rank == 0:
        check(all(bool((t == r).all()) for r, t in enumerate(g)), "gather")
    s = [torch.full((60,), float(r * 10), device=dev) for r in range(world)] if rank == 1 else None
    got = torch.empty(60, device=dev)
    dist.scatter(got, scatter_list=s, src=1)
    check(bool((got == rank * 10).all()), "scatter")
    # all_to_all_single, even and uneven
    a = torch.arange(world * 3, device=dev, dtype=torch.float32) + 100 * rank
    o = torch.empty_like(a)
    dist.all_to_all_single(o, a)
    want = torch.cat([torch.arange(rank * 3, rank * 3 + 3, device=dev, dtype=torch.float32) + 100 * r
                      for r in range(world)])
    check(torch.equal(o, want), "all_to_all_single")
    in_splits = [r + 1 for r in range(world)]  # rank sends r+1 rows to rank r
    a = torch.full((sum(in_splits), 2), float(rank), device=dev)
    out_splits = [rank + 1] * world
    o = torch.empty(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(o, a, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(r), device=dev) for r in range(world)])
    check(torch.equal(o, want), "all_to_all_single uneven")
    # send / recv around a ring (even ranks send first)
    right, left = (rank + 1) % world, (rank - 1) % world
    msg = torch.full((123,), float(rank), device=dev)
    inbox = torch.empty(123, device=dev)
    if rank % 2 == 0:
        dist.send(msg, right)
        dist.recv(inbox, left)
    else:
        dist.recv(inbox, left)
        dist.send(msg, right)
    check(bool((inbox == left).all()), "send/recv ring")
    # batch_isend_irecv around a ring, 4 MiB each way, every rank sending
    # first: one coalescing block (one hetccl group), so no rank waits for a
    # receive that is posted after its send. torch 1.x and releases without
    # Backend.supports_coalescing issue the ops one by one (not checked).
    backend = dist.distributed_c10d._get_default_group()._get_backend(dev) if hasattr(
        dist.distributed_c10d._get_default_group(), "_get_backend") else None
    if getattr(backend, "supports_coalescing", False):
        big = torch.full((1 << 20,), float(rank), device=dev)
        got = torch.empty(1 << 20, device=dev)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, right), dist.P2POp(dist.irecv, got, left)])
        for w in works:
            w.wait()
        check(bool((got == left).all()), "batch_isend_irecv ring (coalesced)")
    dist.barrier()
    # the other kind of memory is staged
    if dev.type == "cuda":
        h = torch.full((64,), 1.0)
        dist.all_reduce(h)
        check(bool((h == world).all()), "CPU tensor on a GPU rank")
    elif torch.cuda.is_available():
        d = torch.full((64,), 1.0, device="cuda")
        dist.all_reduce(d)
        check(bool((d == world).all()), "CUDA tensor on a host rank")
    # monitored_barrier: passes when every rank arrives; when the last rank
    # comes too late, rank 0 names it and the others are not released
    hetccl_torch.monitored_barrier(timeout=timedelta(seconds=60))
    hetccl_torch.monitored_barrier(timeout=timedelta(seconds=60), wait_all_ranks=True)
    late = world - 1
    if rank == late:
        time.sleep(3)
        expect_error(lambda: hetccl_torch.monitored_barrier(timeout=timedelta(seconds=2)), ["hetccl", "not released"],
                     "monitored_barrier reached too late")
    elif rank == 0:
        expect_error(lambda: hetccl_torch.monitored_barrier(timeout=timedelta(seconds=2), wait_all_ranks=True),
                     ["hetccl", f"{late} did not reach the barrier"], "monitored_barrier with a late rank")
    else:
        expect_error(lambda: hetccl_torch.monitored_barrier(timeout=timedelta(seconds=4)), ["hetccl", "not released"],
                     "monitored_barrier without release")
    dist.barrier()
    hetccl_torch.monitored_barrier(timeout=timedelta(seconds=60))  # works again after a failed one
    # bad input: clear errors, and the communicator still works afterwards
    expect_error(lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()[0]), ["hetccl", "dense"], "strided input")
    expect_error(lambda: dist.all_reduce(torch.ones(4, device=dev, dtype=torch.int32), op=dist.ReduceOp.BAND),
                 ["hetccl", "not supported"], "BAND")
    expect_error(lambda: dist.all_gather_into_tensor(torch.empty(3, device=dev), torch.ones(2, device=dev)),
                 ["hetccl", "elements"], "allgather size mismatch")
    x = torch.ones(10, device=dev)
    dist.all_reduce(x)
    check(bool((x == world).all()), "all_reduce after errors")
    subgroups(rank, world, dev)


def subgroups(rank, world, dev):
    """Groups that leave a rank out (new_group makes no backend there), then
    groups of every rank and of other members: each works, in order."""
    if world < 3:
        return
    for members in ([0, 1], list(range(world)), [1, world - 1], [0, 1]):
        g = dist.new_group(members)
        if rank in members:
            t = torch.full((8,), float(rank + 1), device=dev)
            dist.all_reduce(t, group=g)
            want = sum(r + 1 for r in members)
            check(bool((t == want).all()), f"all_reduce in new_group({members}) gives {t[0].item()} (want {want})")
    dist.barrier()


def ddp_step(rank, world, dev):
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 4).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    inp = torch.full((8, 32), float(rank + 1), device=dev)
    ddp(inp).sum().backward()
    g = model.weight.grad.detach().cpu()
    want = 8 * sum(r + 1 for r in range(world)) / world
    check(torch.allclose(g, torch.full_like(g, want)), f"DDP gradient {g[0, 0].item()} (want {want})")


DEADLINE_S = int(os.environ.get("C10D_TEST_DEADLINE_S", "280"))


def worker(rank, world, port, devices, groups, q):
    PROGRESS["rank"] = rank
    faulthandler.enable(all_threads=True)  # a crash prints every thread's Python stack
    # A rank stuck past the deadline prints where (every thread's stack) and exits.
    faulthandler.dump_traceback_later(DEADLINE_S - 20, exit=True)
    try:
        kind = devices[rank]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_DEVICE=kind,
                          HETCCL_GROUP=groups[rank])
        if kind == "cuda":
            torch.cuda.set_device(0)
        import hetccl_torch  # noqa: F401  registers the backend
        dist.init_process_group("hetccl", rank=rank, world_size=world,
                                timeout=timedelta(seconds=int(os.environ.get("HETCCL_TEST_TIMEOUT_S", "120"))))
        check(dist.get_backend() == "hetccl", f"backend is {dist.get_backend()}")
        dev = torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")
        run_checks(rank, world, dev)
        ddp_step(rank, world, dev)
        if kind == "cuda":
            torch.cuda.synchronize()
        dist.destroy_process_group()
        q.put((rank, "ok"))
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="host,host,host")
    ap.add_argument("--groups", default="")
    args = ap.parse_args()
    devices = args.devices.split(",")
    groups = args.groups.split(",") if args.groups else devices
    if len(groups) != len(devices):
        sys.exit("--groups needs one name per rank")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, len(devices), port, devices, groups, q)) for r in range(len(devices))]
    for p in procs:
        p.start()
    results = collect(procs, q, DEADLINE_S)
    ok = len(results) == len(procs) and all(r[1] == "ok" for r in results)
    for r in sorted(results):
        print(f"rank {r[0]}: {r[1]}")
    print("c10d_collectives: ok" if ok else "c10d_collectives: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
