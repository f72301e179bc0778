"""Every c10d call of torch's "nccl" backend on hetccl's libnccl.so.2, checked.

    hetccl-torch-run python3 tests/gpu/torch_dropin_calls.py --world 1
        one process, one group: every call passes straight through to the real
        NCCL (the shape of an all-NVIDIA job)
    hetccl-torch-run python3 tests/gpu/torch_dropin_calls.py --world 2 --groups g0,g1
        two processes on the one GPU, a group each: every call crosses hetccl's
        border (the real NCCL refuses two ranks on one GPU)

Checks all_reduce in every dtype and op (AVG, PREMUL_SUM with a float and with
a tensor factor, i.e. a scalar in device memory), broadcast and reduce from
every root, all_gather(_into_tensor), reduce_scatter_tensor, all_to_all_single
(even and uneven), send/recv, batch_isend_irecv, barrier, new_group, a 20-step
DDP run against the same steps without DDP, and destroy. Prints one line per
check and "torch_dropin_calls: ok" when all passed; exits 1 otherwise.
"""
import argparse
import os
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Checks:
    """Each check: whether it held, and a fingerprint of the tensor it looked
    at (first element and sum), so that a run on the drop-in can be compared
    with a run on NCCL alone (--record)."""

    def __init__(self, rank):
        self.rank = rank
        self.failed = []
        self.passed = 0
        self.seen = {}

    def __call__(self, cond, what, got=None, want=None):
        fp = None
        if isinstance(got, torch.Tensor) and got.numel():
            g = got.double()
            fp = [g.flatten()[0].item(), g.sum().item()]
        self.seen[what] = [bool(cond), fp]
        if cond:
            self.passed += 1
        else:
            detail = ""
            if fp is not None:
                detail = f": got first {fp[0]!r} sum {fp[1]!r}"
                if isinstance(want, torch.Tensor) and want.numel():
                    w = want.double()
                    detail += f", want first {w.flatten()[0].item()!r} sum {w.sum().item()!r}"
            self.failed.append(what + detail)


FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]


def reduce_ref(vals, op):
    out = vals[0].clone()
    for v in vals[1:]:
        if op == dist.ReduceOp.SUM:
            out = out + v
        elif op == dist.ReduceOp.PRODUCT:
            out = out * v
        elif op == dist.ReduceOp.MIN:
            out = torch.minimum(out, v)
        elif op == dist.ReduceOp.MAX:
            out = torch.maximum(out, v)
    return out


def collectives(rank, world, dev, ck):
    n = 4099
    # all_reduce: every type x op; inputs small integers (exact in every type).
    for dt in FLOATS + INTS:
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
        if dt in FLOATS:
            ops.append(dist.ReduceOp.AVG)
        for op in ops:
            vals = [((torch.arange(n, device=dev) % 3) + 1 + r).to(dt) for r in range(world)]
            x = vals[rank].clone()
            dist.all_reduce(x, op=op)
            if op == dist.ReduceOp.AVG:
                want = (sum(v.double() for v in vals) / world).to(dt)
            else:
                want = reduce_ref(vals, op)
            ck(torch.equal(x, want), f"all_reduce {dt} {op}", x, want)
    # PREMUL_SUM: a float factor (host immediate) and a tensor factor (ncclScalarDevice).
    for dt in FLOATS:
        for factor in (2.0, torch.tensor([0.5], device=dev, dtype=dt if dt != torch.bfloat16 else torch.float32)):
            x = torch.full((n,), rank + 1.0, device=dev, dtype=dt)
            op = dist._make_nccl_premul_sum(factor)
            dist.all_reduce(x, op=op)
            f = factor if isinstance(factor, float) else factor.item()
            if dt == torch.bfloat16:
                # torch hands the factor of a bfloat16 op over as a float32, and
                # NCCL reads the scalar's first two bytes as the bfloat16 (seen
                # with NCCL alone): the low half of the float's bits.
                bits = torch.tensor([f], dtype=torch.float32).view(torch.int32).item() & 0xFFFF
                f = torch.tensor([bits << 16], dtype=torch.int32).view(torch.float32).item()
            want = torch.full((n,), f * sum(r + 1.0 for r in range(world)), device=dev, dtype=dt)
            ck(torch.allclose(x.double(), want.double()), f"all_reduce premul_sum {dt} factor {type(factor).__name__}",
               x, want)
    # A tensor factor changed after the op was made: read when the collective runs.
    t = torch.tensor([3.0], device=dev)
    op = dist._make_nccl_premul_sum(t)
    t.fill_(4.0)
    x = torch.ones(10, device=dev)
    dist.all_reduce(x, op=op)
    ck(bool((x == 4.0 * world).all()), "premul_sum tensor factor read when the call runs", x)
    # broadcast and reduce from every root
    for root in range(world):
        b = torch.arange(n, device=dev, dtype=torch.int64) * (rank + 7)
        dist.broadcast(b, src=root)
        ck(torch.equal(b, torch.arange(n, device=dev, dtype=torch.int64) * (root + 7)), f"broadcast root {root}")
        r = torch.full((n,), float(rank + 1), device=dev)
        dist.reduce(r, dst=root, op=dist.ReduceOp.SUM)
        if rank == root:
            ck(bool((r == world * (world + 1) / 2).all()), f"reduce root {root}")
    # gathers and scatters
    part = torch.full((333,), rank, device=dev, dtype=torch.int32)
    out = torch.empty(333 * world, device=dev, dtype=torch.int32)
    dist.all_gather_into_tensor(out, part)
    ck(all(bool((out[333 * r:333 * (r + 1)] == r).all()) for r in range(world)), "all_gather_into_tensor")
    parts = [torch.empty(5, device=dev) for _ in range(world)]
    dist.all_gather(parts, torch.full((5,), float(rank), device=dev))
    ck(all(bool((p == r).all()) for r, p in enumerate(parts)), "all_gather list")
    big = torch.arange(world * 500, device=dev, dtype=torch.float32) * (rank + 1)
    red = torch.empty(500, device=dev)
    dist.reduce_scatter_tensor(red, big)
    coef = world * (world + 1) / 2
    want = (torch.arange(500, device=dev, dtype=torch.float32) + 500 * rank) * coef
    ck(torch.equal(red, want), "reduce_scatter_tensor")
    a2a_in = torch.arange(2 * world, device=dev, dtype=torch.float32) + 100 * rank
    a2a_out = torch.empty(2 * world, device=dev)
    dist.all_to_all_single(a2a_out, a2a_in)
    want = torch.cat([torch.tensor([100.0 * r + 2 * rank, 100.0 * r + 2 * rank + 1]) for r in range(world)]).to(dev)
    ck(torch.equal(a2a_out, want), "all_to_all_single")
    # uneven: rank r sends r+1+p elements to rank p
    in_splits = [rank + 1 + p for p in range(world)]
    out_splits = [r + 1 + rank for r in range(world)]
    a2a_in = torch.full((sum(in_splits),), float(rank), device=dev)
    a2a_out = torch.empty(sum(out_splits), device=dev)
    dist.all_to_all_single(a2a_out, a2a_in, out_splits, in_splits)
    want = torch.cat([torch.full((out_splits[r],), float(r)) for r in range(world)]).to(dev)
    ck(torch.equal(a2a_out, want), "all_to_all_single uneven")
    # point to point
    if world > 1:
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        if rank == 0:
            dist.send(torch.full((5,), 3.5, device=dev), dst=nxt)
            r = torch.empty(5, device=dev)
            dist.recv(r, src=prv)
        else:
            r = torch.empty(5, device=dev)
            dist.recv(r, src=prv)
            dist.send(torch.full((5,), 3.5, device=dev), dst=nxt)
        ck(bool((r == 3.5).all()), "send/recv")
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    s = torch.full((7,), float(rank), device=dev)
    r = torch.empty(7, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt), dist.P2POp(dist.irecv, r, prv)])
    for q in reqs:
        q.wait()
    ck(bool((r == prv).all()), "batch_isend_irecv")
    dist.barrier()
    ck(True, "barrier")
    # new_group: all ranks, and rank 0 alone
    g_all = dist.new_group(list(range(world)))
    x = torch.ones(3, device=dev)
    dist.all_reduce(x, group=g_all)
    ck(bool((x == world).all()), "new_group all ranks")
    g0 = dist.new_group([0])
    if rank == 0:
        x = torch.full((3,), 5.0, device=dev)
        dist.all_reduce(x, group=g0)
        ck(bool((x == 5.0).all()), "new_group [0]")


def ddp_steps(rank, world, dev, ck, steps=20):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    ref = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.05)
    gen = torch.Generator(device="cpu").manual_seed(1)
    teacher = torch.randn(256, 10, generator=gen)  # labels the model can learn
    losses = []
    for _ in range(steps):
        xs = [torch.randn(32, 256, generator=gen) for _ in range(world)]
        ys = [(x @ teacher).argmax(dim=1) for x in xs]
        loss = torch.nn.functional.cross_entropy(ddp(xs[rank].to(dev)), ys[rank].to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        # The reference: the mean loss over every rank's batch, on one process.
        rloss = sum(torch.nn.functional.cross_entropy(ref(x.to(dev)), y.to(dev)) for x, y in zip(xs, ys)) / world
        ropt.zero_grad()
        rloss.backward()
        ropt.step()
        losses.append(rloss.item())
    diff = max((p - q).abs().max().item() for p, q in zip(model.parameters(), ref.parameters()))
    ck(diff < 1e-4, f"DDP {steps} steps match the single-process reference (max diff {diff:.2e})")
    ck(losses[-1] < losses[0], f"DDP loss decreased ({losses[0]:.3f} -> {losses[-1]:.3f})")


def worker(rank, world, port, groups, q):
    ck = Checks(rank)
    try:
        env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if groups:
            env["HETCCL_GROUP"] = groups[rank]
        os.environ.update(env)
        ngpu = torch.cuda.device_count()
        dev = torch.device("cuda", rank % ngpu)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
        maps = open("/proc/self/maps").read()
        dropin = "dropin/libnccl.so" in maps or "hetccl-dropin" in maps
        ck(dropin == (os.environ.get("HETCCL_EXPECT_DROPIN", "1") == "1"), "hetccl's libnccl.so.2 is loaded")
        collectives(rank, world, dev, ck)
        ddp_steps(rank, world, dev, ck)
        torch.cuda.synchronize()
        dist.destroy_process_group()
        ck(True, "destroy_process_group")
        q.put((rank, ck.passed, ck.failed, ck.seen, None))
    except Exception:
        q.put((rank, ck.passed, ck.failed, ck.seen, traceback.format_exc()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--groups", default="", help="comma list of group names by rank (HETCCL_GROUP)")
    ap.add_argument("--record", default="", help="write every check's result and fingerprint here (JSON)")
    ap.add_argument("--compare", default="", help="a --record file of a run on NCCL alone: every check's result "
                    "and fingerprint here must be the same")
    a = ap.parse_args()
    groups = a.groups.split(",") if a.groups else []
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a.world, port, groups, q)) for r in range(a.world)]
    for p in procs:
        p.start()
    results = sorted((q.get(timeout=600) for _ in procs), key=lambda r: r[0])
    for p in procs:
        p.join(timeout=60)
    ok = True
    seen = {}
    for rank, passed, failed, rseen, exc in results:
        print(f"rank {rank}: {passed} checks passed, {len(failed)} failed")
        for f in failed:
            print(f"rank {rank}: FAILED {f}")
        if exc:
            print(f"rank {rank}: EXCEPTION\n{exc}")
        ok = ok and not failed and not exc
        seen[str(rank)] = rseen
    if a.record:
        # NCCL alone: what it gets right and wrong is the reference the
        # drop-in's one-group run must equal (--compare). A check NCCL itself
        # fails is printed as its own behaviour; only an exception fails here.
        import json
        json.dump(seen, open(a.record, "w"), indent=1)
        nccl_own = sum(len(r[2]) for r in results)
        if nccl_own:
            print(f"NCCL alone fails {nccl_own} check(s) above: its own behaviour, recorded for --compare")
        ok = not any(r[4] for r in results)
    if a.compare:
        # Same as NCCL alone: a check that NCCL itself fails is the same
        # behaviour, and a different result is not.
        import json
        ref = json.load(open(a.compare))
        same = differ = 0
        for rank, checks in seen.items():
            for what, res in checks.items():
                if what == "hetccl's libnccl.so.2 is loaded":
                    continue
                r = ref.get(rank, {}).get(what)
                if r == res:
                    same += 1
                else:
                    differ += 1
                    print(f"rank {rank}: DIFFERS from NCCL alone: {what}: drop-in {res}, NCCL {r}")
        print(f"compared with NCCL alone: {same} checks the same, {differ} differ")
        ok = differ == 0 and not any(r[4] for r in results)
    print(f"torch {torch.__version__}, NCCL as torch sees it {torch.cuda.nccl.version()}")
    print("torch_dropin_calls: ok" if ok else "torch_dropin_calls: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
