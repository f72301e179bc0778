"""hetccl_torch.balance on CPU ranks of different speeds (a per-sample sleep
in the forward stands for a slower device):

    python3 tests/torch/balance_training.py --backend hetccl --groups a,b,b --delays 0,0.004,0.0015

Checks, in this order, on every rank:
  - bad input fails before any step, on every rank, naming the rank and the
    numbers: a global batch smaller than the ranks, a rank at zero speed,
    caps that cannot hold the global batch, ranks that disagree on it;
  - a trial that runs out of memory (a step function that raises CUDA's
    message above a size) backs off and caps that rank's share; a step
    function that fails on one rank fails the plan on every rank;
  - the sampler cuts every global batch into the ranks' shares: each sample
    once per step, the same cut on every rank;
  - the plan follows the speeds (not the equal split), and a balanced DDP run
    with re-planning every 4 steps makes the losses of one process on the
    whole global batch at every step, also after one rank slows down in the
    middle (the plan moves samples away from it at a step boundary);
  - the same for the FSDP2 route (gradients weighted through the outputs,
    then summed), run here on DDP with a summing hook; FSDP2 itself needs
    torch 2.4+, which must say so where it is missing;
  - ranks whose plans differ at a re-plan fail with an error naming the rank;
    a rank that never reaches the re-plan leaves the others with an error
    after the group's timeout, not a hang.
Prints "balance_training: ok" and exits 0 when all passed. hetccl_torch
must be importable (PYTHONPATH=BUILD/pysite).
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
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyutil"))
sys.path.insert(0, os.path.join(HERE, "..", "train"))
from expect_error import expect_error as expect_error_of  # noqa: E402
from spawn_ranks import collect  # noqa: E402
from train_gpt import GPT, make_tokens  # noqa: E402

B = 24  # global batch
STEPS = 16
TOL = 1e-5  # relative loss difference to the one-process reference (fp32: a different summation order)
SHAPE = dict(vocab=32, seq=16, d=32, layers=1, heads=2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slow(nn.Module):
    """The model, slowed by `delay` seconds a sample in its forward."""

    def __init__(self, inner, delay):
        super().__init__()
        self.inner = inner
        self.delay = [delay]

    def forward(self, x):
        if self.delay[0]:
            time.sleep(self.delay[0] * x.shape[0])
        return self.inner(x)


def new_gpt():
    torch.manual_seed(0)
    return GPT(SHAPE["vocab"], SHAPE["seq"], SHAPE["d"], SHAPE["layers"], SHAPE["heads"])


def loss_of(model, batch):
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, SHAPE["vocab"]), batch[:, 1:].reshape(-1))


def reference(data, steps):
    """One process, the whole global batch a step: the losses a balanced run must give."""
    model = new_gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    out = []
    for step in range(steps):
        loss = loss_of(model, data[step])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def expect_error(fn, words, what):
    from hetccl_torch.balance import BalanceError
    return expect_error_of(fn, words, what, BalanceError)


def check_bad_input(rank, world, ddp, notes):
    from hetccl_torch import balance
    msg, _ = expect_error(lambda: balance.plan(ddp, None, world - 1, rate=1.0),
                          [f"{world - 1} samples", f"{world} ranks"], "global batch smaller than the ranks")
    notes.append(f"small batch: {msg}")
    msg, _ = expect_error(lambda: balance.plan(ddp, None, B, rate=0.0 if rank == 1 else 100.0, exchange_report=False),
                          ["rank 1", "0 samples/s"], "a rank at zero speed")
    notes.append(f"zero speed: {msg}")
    msg, _ = expect_error(lambda: balance.plan(ddp, None, B, rate=100.0, max_batch=2 + rank, exchange_report=False),
                          [f"hold {sum(2 + r for r in range(world))} samples", f"global batch of {B}", "rank 0",
                           f"rank {world - 1}"], "caps that cannot hold the global batch")
    notes.append(f"caps: {msg}")
    msg, _ = expect_error(lambda: balance.plan(ddp, None, B + (rank == world - 1), rate=100.0, exchange_report=False),
                          ["global batch", f"rank 0 has {B}", f"rank {world - 1}: {B + 1}"], "ranks that disagree")
    notes.append(f"disagreement: {msg}")


def check_out_of_memory(rank, world, notes):
    """Rank 1 cannot hold more than 5 samples: its trial backs off, its share is capped."""
    from hetccl_torch import balance
    model = new_gpt()
    data = make_tokens(1, B, SHAPE["seq"], SHAPE["vocab"], seed=5)[0]

    def step(n):
        if rank == 1 and n > 5:
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {n} samples (a test's stand-in)")
        loss_of(model, data[:n]).backward()

    p = balance.plan(None, step, B, exchange_report=False, log=None)
    if p.shares[1] > 5 or p.caps[1] != 5 or p.cap_sources[1] != "found by trial" or sum(p.shares) != B:
        raise AssertionError(f"out-of-memory back-off: shares {p.shares}, caps {p.caps}, {p.cap_sources}")
    notes.append(f"out of memory on rank 1 above 5 samples: shares {p.shares}, caps {p.caps}")

    def broken(n):
        if rank == 1:
            raise ValueError("a broken step function")
        loss_of(model, data[:n]).backward()

    msg, _ = expect_error(lambda: balance.plan(None, broken, B, exchange_report=False, log=None),
                          ["step function failed on rank 1"], "a step function that fails on one rank")
    notes.append(f"a failing step function: {msg}")


def check_sampler(rank, world, notes):
    from hetccl_torch import balance
    p = balance.plan(None, None, B, rate=float(rank + 1), exchange_report=False, log=None)
    sampler = p.sampler(100, shuffle=True, seed=7)
    sampler.set_epoch(3)
    steps = list(sampler)
    if len(steps) != 100 // B:
        raise AssertionError(f"sampler: {len(steps)} steps of 100 samples")
    for k, mine in enumerate(steps):
        got = torch.full((B,), -1, dtype=torch.int64)
        got[:len(mine)] = torch.tensor(mine, dtype=torch.int64)
        parts = [torch.empty(B, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(parts, got)
        used = [int(i) for part in parts for i in part.tolist() if i >= 0]
        order = torch.randperm(100, generator=torch.Generator().manual_seed(10))[k * B:(k + 1) * B].tolist()
        if len(used) != B or sorted(used) != sorted(order) or used != order:
            raise AssertionError(f"sampler step {k}: the ranks' cuts {used} are not the global batch {order}")
    notes.append(f"sampler: {len(steps)} global batches cut {p.shares}, every sample once")


def train(rank, world, ddp, slow, p, data, steps, slow_down_at=None):
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
    losses, shares = [], []
    for step in range(steps):
        if slow_down_at is not None and step == slow_down_at and rank == 0:
            slow.delay[0] = 0.012  # rank 0 becomes the slowest
        if p is None:
            per = B // world
            batch = data[step, rank * per:(rank + 1) * per]
        else:
            batch = p.cut(data[step])
            shares.append(list(p.shares))
        loss = loss_of(ddp, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if p is None:
            t = loss.detach().reshape(1)
            dist.all_reduce(t)
            losses.append(t.item() / world)
        else:
            losses.append(p.mean(loss))
    return losses, shares


def worst(losses, ref):
    return max(abs(a - b) / abs(b) for a, b in zip(losses, ref))


def check_training(rank, world, delays, notes):
    from hetccl_torch import balance
    from hetccl_torch.balance import solve
    data = make_tokens(STEPS, B, SHAPE["seq"], SHAPE["vocab"], seed=11)
    ref = reference(data, STEPS) if rank == 0 else None
    # equal split, DDP's own averaging: the tolerance's yardstick
    slow = Slow(new_gpt(), delays[rank])
    ddp = nn.parallel.DistributedDataParallel(slow)
    equal, _ = train(rank, world, ddp, slow, None, data, STEPS)
    # balanced, re-planned every 4 steps; rank 0 slows down at step 6
    slow = Slow(new_gpt(), delays[rank])
    ddp = nn.parallel.DistributedDataParallel(slow)
    p = balance.plan(ddp, lambda n: loss_of(ddp, data[0, :n]).backward(), B, replan_every=4, min_gain=0.05,
                     log=print if rank == 0 else None)
    first = list(p.shares)
    if first == solve.equal_split(B, world):
        raise AssertionError(f"the plan is the equal split {first} though the ranks' speeds differ")
    fastest, slowest = min(range(world), key=lambda r: delays[r]), max(range(world), key=lambda r: delays[r])
    if first[fastest] != max(first) or first[slowest] != min(first):
        raise AssertionError(f"shares {first} do not follow the speeds (delays {delays}): the fastest rank must get "
                             f"the most, the slowest the least")
    losses, shares = train(rank, world, ddp, slow, p, data, STEPS, slow_down_at=6)
    last = shares[-1]
    if not last[0] < first[0]:
        raise AssertionError(f"after rank 0 slowed down the plan kept its share: {first} -> {last} ({shares})")
    changed = [k for k in range(1, STEPS) if shares[k] != shares[k - 1]]
    if any(k % 4 for k in changed):
        raise AssertionError(f"the plan changed at steps {changed}, not only at the boundaries (every 4)")
    # the FSDP2 route: the outputs carry the weights, a summing exchange
    slow = Slow(new_gpt(), 0.0)
    ddp = nn.parallel.DistributedDataParallel(slow)
    q = balance.plan(None, None, B, rate=[3.0, 1.0, 2.0, 1.5][rank % 4], exchange_report=False, log=None)
    ddp.register_comm_hook(None, balance.sum_allreduce_hook)
    balance.scale_output_gradients(ddp.module, q)
    routed, _ = train(rank, world, ddp, slow, q, data, 8)
    if rank == 0:
        runs = (("equal", equal), ("balanced", losses), ("output-weighted", routed))
        bad = {name: worst(got, ref) for name, got in runs}
        notes.append(f"shares {first} -> {last} (changed at steps {changed}); largest relative loss difference to "
                     f"one process: equal split {bad['equal']:.3g}, balanced {bad['balanced']:.3g}, weighted "
                     f"outputs {bad['output-weighted']:.3g} (tolerance {TOL:g}); q shares {q.shares}")
        if max(bad.values()) > TOL:
            raise AssertionError(f"losses differ from the one-process reference: {bad}")
        notes.append(f"measuring cost: {p.measure_seconds:.3f} s of trials on rank 0")
        notes.append("report:\n" + p.report)


def check_fsdp2_missing(notes):
    from hetccl_torch import balance
    if int(torch.__version__.split(".")[0]) >= 2:
        return
    q = balance.plan(None, None, B, rate=1.0, exchange_report=False, log=None)
    msg, _ = expect_error(lambda: balance.weight_fully_shard(new_gpt(), q), ["FSDP2", "torch 2.4", torch.__version__],
                          "FSDP2 on a torch without it")
    msg2, _ = expect_error(lambda: balance.plan(new_gpt(), None, B, rate=1.0), ["FSDP2", "DistributedDataParallel"],
                           "a plain module on a torch without FSDP2")
    notes.append(f"FSDP2 missing: {msg}")


def check_disagreement(rank, world, notes):
    from hetccl_torch import balance
    p = balance.plan(None, None, B, rate=1.0 + rank, replan_every=2, exchange_report=False, log=None)
    if rank == world - 1:
        p.shares = list(reversed(p.shares))  # a rank whose plan went its own way
    p.next_share()
    p.next_share()
    msg, _ = expect_error(p.next_share, ["disagree on the plan", "at step 2", f"rank {world - 1}"], "plans that differ")
    notes.append(f"plans differ: {msg}")


def check_absent_rank(rank, world, notes):
    from hetccl_torch import balance
    group = dist.new_group(timeout=timedelta(seconds=6))
    p = balance.plan(None, None, B, rate=1.0 + rank, replan_every=2, exchange_report=False, group=group, log=None)
    p.next_share()
    p.next_share()
    if rank == world - 1:
        return  # never reaches the re-plan at step 2
    t0 = time.perf_counter()
    msg, _ = expect_error(p.next_share, ["re-plan exchange at step 2 failed", "timeout"], "a rank that never came")
    notes.append(f"absent rank: error after {time.perf_counter() - t0:.1f} s: {msg[:200]}")


def worker(rank, world, port, args, q):
    faulthandler.dump_traceback_later(args.deadline - 10, exit=True)
    notes = []
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_DEVICE="host",
                          HETCCL_GROUP=args.groups[rank])
        torch.set_num_threads(1)
        if args.backend == "hetccl":
            import hetccl_torch  # noqa: F401  registers the backend
        dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timedelta(seconds=60))
        t0 = time.perf_counter()
        check_bad_input(rank, world, nn.parallel.DistributedDataParallel(new_gpt()), notes)
        check_out_of_memory(rank, world, notes)
        check_sampler(rank, world, notes)
        check_fsdp2_missing(notes)
        check_training(rank, world, args.delays, notes)
        check_disagreement(rank, world, notes)
        check_absent_rank(rank, world, notes)
        notes.append(f"checks took {time.perf_counter() - t0:.1f} s")
        q.put((rank, "ok", notes))
        q.close()
        q.join_thread()  # the report is out before the process ends without ceremony
        if rank == world - 1:
            time.sleep(8)  # the others' exchange times out first
        os._exit(0)  # the absent rank's group is broken: no orderly destroy
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}", notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="hetccl", choices=["hetccl", "gloo"])
    ap.add_argument("--groups", default="a,b,b", help="hetccl group of each rank (their count is the rank count)")
    ap.add_argument("--delays", default="0,0.006,0.003", help="seconds a sample each rank's forward sleeps")
    ap.add_argument("--deadline", type=int, default=150)
    args = ap.parse_args()
    args.groups = args.groups.split(",")
    args.delays = [float(x) for x in args.delays.split(",")]
    world = len(args.groups)
    if len(args.delays) != world or not 2 <= world <= 4:
        sys.exit("balance_training: 2 to 4 ranks, one delay each")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    t0 = time.perf_counter()
    procs = [ctx.Process(target=worker, args=(r, world, port, args, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = collect(procs, q, args.deadline)
    ok = len(results) == world and all(r[1] == "ok" for r in results)
    for r in sorted(results, key=lambda r: r[0]):
        print(f"rank {r[0]}: {r[1]}")
        for note in (r[2] if len(r) > 2 else []):
            print(f"  {note}")
    print(f"balance_training: {'ok' if ok else 'FAILED'} ({args.backend}, {world} ranks, "
          f"{time.perf_counter() - t0:.1f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
