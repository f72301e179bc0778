"""Sharded training over subgroups across vendor groups, on the native
"hetccl" backend with CPU ranks:

    HETCCL_TRANSPORT=shm python3 tests/torch/sharded_subgroups.py --groups a,a,b,b

Four ranks in two hetccl groups. Tensor-parallel pairs inside each group
([0, 1] and [2, 3], made with new_group) and data-parallel pairs across the
groups ([0, 2] and [1, 3], also with new_group: torch 1.13 has no
split_group, and its new_subgroups_by_enumeration refuses to run without
CUDA; the split form runs in tests/gpu/torch_fsdp2_subgroups.py). The model is an
MLP of four linears, fp32: a replicated one, a column-parallel and a
row-parallel one over the TP pair (an all_reduce of the input's gradient and
of the output in the TP group, as Megatron's f and g), and a replicated head.
Every parameter is sharded ZeRO-3 style over the DP pair, on dim 0 with
padding as FSDP2 shards (the row counts 5, 6 and 3 do not divide by 2): the
shards are all-gathered before the forward, the gradients reduce-scattered
after the backward, and SGD with momentum (whose steps follow the
gradients' scale) or Adam (which hides it) steps on the shard. Checks, on
every rank:
  - the losses equal one process on the whole global batch at every step,
    and so do the parameters after the last step, with the flat forms FSDP2
    issues (all_gather_into_tensor, reduce_scatter_tensor with AVG, of one
    padded buffer) and with the list forms (all_gather, reduce_scatter) of
    the padded shards;
  - the list forms with shards of unequal sizes (the unpadded cut) are
    refused on every rank before anything moves, naming the element counts,
    and the subgroup works afterwards;
  - a subgroup of three ranks across both vendor groups gives the right
    values for rooted calls (a root in each group), an uneven
    all_to_all_single and send/recv between the groups;
  - a subgroup call with sizes that differ between the members (an
    all_reduce, the flat all-gather of unpadded shards) fails on every
    member with a collective mismatch;
  - a subgroup call that one member never issues fails on the other at the
    group's timeout, and that member's next call on the group then fails too,
    naming the rank that failed.
Prints "sharded_subgroups: ok" and exits 0 when all passed. hetccl_torch must
be importable (PYTHONPATH=BUILD/pysite).
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))
from expect_error import expect_error  # noqa: E402
from spawn_ranks import spawn_and_collect  # noqa: E402

D_IN, D0, HIDDEN, D2, CLASSES = 7, 8, 10, 6, 3  # HIDDEN splits over the TP pair: 5 rows each
BATCH = 16  # global batch: 8 samples for each DP rank, the same 8 on both ranks of a TP pair
STEPS = 12
OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
}
# (collective form, optimizer) of each run
RUNS = (("flat", "sgd"), ("list", "sgd"), ("flat", "adam"))
# Relative difference of each step's loss to the one-process reference. fp32 sums in another order here (the
# row-parallel output as two partial sums, the gradients as two half-batch means): each loss differs by a few
# ulps (1.6e-7 at most over the 12 steps here). balance_training.py uses the same bound. A wrong sum or scale
# (a TP all_reduce left out, the gradients not averaged under SGD) is off by 1e-2 or more.
TOL = 1e-5
PARAM_TOL = 1e-5  # absolute, on the final weights
GROUP_TIMEOUT_S = 5  # the bad-input groups' timeout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def full_model():
    """The unsharded parameters in order, the same on every rank."""
    g = torch.Generator().manual_seed(0)

    def lin(o, i):
        return [torch.randn(o, i, generator=g) / i**0.5, torch.randn(o, generator=g) * 0.1]

    return lin(D0, D_IN) + lin(HIDDEN, D0) + lin(D2, HIDDEN) + lin(CLASSES, D2)


def batches():
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(D_IN, CLASSES, generator=g)
    out = []
    for _ in range(STEPS):
        x = torch.randn(BATCH, D_IN, generator=g)
        out.append((x, (x @ teacher).argmax(dim=1)))
    return out


def forward(p, x, tp_in=lambda t: t, tp_out=lambda t: t):
    """The model on parameters p; tp_in and tp_out are the TP pair's f and g (identity on one process)."""
    w0, b0, w1, b1, w2, b2, w3, b3 = p
    h = torch.tanh(x @ w0.t() + b0)
    h = torch.nn.functional.gelu(tp_in(h) @ w1.t() + b1)  # column-parallel: this rank's rows of w1
    h = torch.tanh(tp_out(h @ w2.t()) + b2)  # row-parallel: this rank's columns of w2, partial sums added
    return h @ w3.t() + b3


def reference(data, optimizer):
    params = [t.clone().requires_grad_() for t in full_model()]
    opt = OPTIMIZERS[optimizer](params)
    losses = []
    for x, y in data:
        loss = torch.nn.functional.cross_entropy(forward(params, x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [t.detach() for t in params]


class TPInput(torch.autograd.Function):
    """Megatron's f: identity forward, the input gradient summed over the TP pair."""

    @staticmethod
    def forward(ctx, t, group):
        ctx.group = group
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class TPOutput(torch.autograd.Function):
    """Megatron's g: the partial outputs summed over the TP pair, identity backward."""

    @staticmethod
    def forward(ctx, t, group):
        t = t.contiguous().clone()
        dist.all_reduce(t, group=group)
        return t

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def tp_piece(full, tp_rank):
    """This TP rank's part of each parameter: rows of w1 and b1, columns of w2, the rest whole."""
    w0, b0, w1, b1, w2, b2, w3, b3 = full
    half = HIDDEN // 2
    rows = slice(tp_rank * half, (tp_rank + 1) * half)
    return [w0, b0, w1[rows].contiguous(), b1[rows].contiguous(), w2[:, rows].contiguous(), b2, w3, b3]


class Sharded:
    """The parameters of one TP rank, sharded over the DP pair on dim 0 as FSDP2 does: rows padded up to a
    multiple of the pair's size, each rank keeping its block of rows. `form` picks the collectives: "flat"
    (one padded buffer: all_gather_into_tensor, reduce_scatter_tensor) or "list" (all_gather, reduce_scatter
    of one padded shard per rank)."""

    def __init__(self, params, dp_group, dp_rank, dp_size, form, optimizer):
        self.shapes = [t.shape for t in params]
        self.rows = [-(-t.shape[0] // dp_size) for t in params]  # padded rows per rank
        self.group, self.rank, self.size, self.form = dp_group, dp_rank, dp_size, form
        self.shards = [self.cut(t, i, dp_rank).clone() for i, t in enumerate(params)]
        self.opt = OPTIMIZERS[optimizer](self.shards)
        self.numel = sum(s.numel() for s in self.shards)

    def cut(self, t, i, r):
        padded = torch.zeros((self.rows[i] * self.size, ) + tuple(t.shape[1:]))
        padded[:t.shape[0]] = t
        return padded[r * self.rows[i]:(r + 1) * self.rows[i]]

    def unpack(self, flat_of_rank):
        """Whole parameters from each rank's flat shard buffer."""
        out = []
        at = 0
        for i, shape in enumerate(self.shapes):
            n = self.shards[i].numel()
            parts = [f[at:at + n].view(self.shards[i].shape) for f in flat_of_rank]
            out.append(torch.cat(parts)[:shape[0]].contiguous())
            at += n
        return out

    def gather(self):
        mine = torch.cat([s.detach().reshape(-1) for s in self.shards])
        if self.form == "flat":
            flat = torch.empty(self.numel * self.size)
            dist.all_gather_into_tensor(flat, mine, group=self.group)
            per_rank = list(flat.chunk(self.size))
        else:
            per_rank = [torch.empty(self.numel) for _ in range(self.size)]
            dist.all_gather(per_rank, mine, group=self.group)
        return [t.requires_grad_() for t in self.unpack(per_rank)]

    def reduce_gradients(self, whole):
        """Each rank's padded gradient rows, averaged over the pair, into this rank's shard."""
        per_rank = []
        for r in range(self.size):
            per_rank.append(torch.cat([self.cut(t.grad, i, r).reshape(-1) for i, t in enumerate(whole)]))
        mine = torch.empty(self.numel)
        if self.form == "flat":
            # the mean over the pair, as FSDP2 asks of NCCL (each DP rank's loss is the mean over its half batch)
            dist.reduce_scatter_tensor(mine, torch.cat(per_rank), op=dist.ReduceOp.AVG, group=self.group)
        else:
            dist.reduce_scatter(mine, per_rank, group=self.group)
            mine /= self.size
        at = 0
        for s in self.shards:
            s.grad = mine[at:at + s.numel()].view(s.shape).clone()
            at += s.numel()

    def step(self):
        self.opt.step()
        self.opt.zero_grad()


def train(form, optimizer, tp, dp, data):
    """STEPS steps of the sharded model; the global loss of each step (the DP pair's mean)."""
    tp_group, tp_rank = tp
    dp_group, dp_rank = dp
    model = Sharded(tp_piece(full_model(), tp_rank), dp_group, dp_rank, 2, form, optimizer)
    per = BATCH // 2
    losses = []
    for x, y in data:
        params = model.gather()
        xs, ys = x[dp_rank * per:(dp_rank + 1) * per], y[dp_rank * per:(dp_rank + 1) * per]
        out = forward(params, xs, lambda t: TPInput.apply(t, tp_group), lambda t: TPOutput.apply(t, tp_group))
        loss = torch.nn.functional.cross_entropy(out, ys)
        loss.backward()
        model.reduce_gradients(params)
        model.step()
        t = loss.detach().reshape(1).clone()
        dist.all_reduce(t, group=dp_group)
        losses.append(t.item() / 2)
    return losses, model.gather()


def check_training(rank, tp, dp, notes):
    data = batches()
    for form, optimizer in RUNS:
        ref_losses, ref_params = reference(data, optimizer)
        want = tp_piece(ref_params, tp[1])
        losses, params = train(form, optimizer, tp, dp, data)
        worst = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses))
        pdiff = max((a.detach() - b).abs().max().item() for a, b in zip(params, want))
        what = f"{form} calls, {optimizer}"
        if not worst <= TOL or not pdiff <= PARAM_TOL:
            raise AssertionError(f"{what}: losses {losses} against one process {ref_losses}: largest relative "
                                 f"difference {worst:.3g} (tolerance {TOL:g}), weights {pdiff:.3g}")
        if not ref_losses[-1] < ref_losses[0]:
            raise AssertionError(f"{what}: the reference does not learn: {ref_losses}")
        notes.append(f"{what}: {STEPS} steps, losses {losses[0]:.5f} -> {losses[-1]:.5f}, largest relative "
                     f"difference to one process {worst:.3g}, weights {pdiff:.3g}")


def check_unequal_lists(dp, notes):
    """The list forms with the unpadded cut (3 and 2 rows of a 5-row parameter): refused on every rank before
    anything moves, and the subgroup works afterwards."""
    group, dp_rank = dp
    sizes = [3 * D0, 2 * D0]
    mine = torch.ones(sizes[dp_rank])
    outs = [torch.empty(n) for n in sizes]
    msg, _ = expect_error(lambda: dist.all_gather(outs, mine, group=group),
                          ["hetccl allgather", "elements where", "are needed"],
                          "all_gather of unequal tensors")
    notes.append(f"all_gather of unequal tensors: {msg.splitlines()[0]}")
    ins = [torch.ones(n) for n in sizes]
    msg, _ = expect_error(lambda: dist.reduce_scatter(torch.empty(sizes[dp_rank]), ins, group=group),
                          ["hetccl reduce_scatter", "elements where"], "reduce_scatter of unequal tensors")
    notes.append(f"reduce_scatter of unequal tensors: {msg.splitlines()[0]}")
    t = torch.full((5, ), float(dp_rank + 1))
    dist.all_reduce(t, group=group)
    if not bool((t == 3).all()):
        raise AssertionError(f"the DP group after refused calls: {t.tolist()}")


def check_mismatch(rank, notes):
    """Sizes that differ between the members of a subgroup across the vendor groups fail every member: an
    all_reduce of different counts, and the flat all-gather of unpadded shards (5 rows cut as 3 and 2, each
    member's output sized by its own shard), told in elements ("count 24, float", not bytes), and shards of the same bytes in
    float32 on one member and int32 on the other. A group each: a mismatch fails its communicator for good."""
    members = [0, 2]
    dtypes = (torch.float32, torch.int32)
    cases = (("an all_reduce of 1000 and 1500 elements", ["hetccl allreduce"],
              lambda g, me: dist.all_reduce(torch.ones(1000 + 500 * me), group=g)),
             ("an all_gather_into_tensor of 3 and 2 rows", ["hetccl allgather_into_tensor", "count 24, float"],
              lambda g, me: dist.all_gather_into_tensor(torch.empty(2 * (3 - me) * D0), torch.ones((3 - me) * D0),
                                                        group=g)),
             ("an all_gather_into_tensor of float32 and int32 shards", ["hetccl allgather_into_tensor", "int32"],
              lambda g, me: dist.all_gather_into_tensor(torch.empty(2 * D0, dtype=dtypes[me]),
                                                        torch.ones(D0, dtype=dtypes[me]), group=g)))
    for what, words, fn in cases:
        g = dist.new_group(members, timeout=timedelta(seconds=GROUP_TIMEOUT_S))
        if rank not in members:
            continue
        msg, took = expect_error(lambda: fn(g, members.index(rank)), words + ["collective mismatch"], what)
        if took > GROUP_TIMEOUT_S + 5:
            raise AssertionError(f"{what}: the mismatch took {took:.1f} s to fail")
        notes.append(f"{what}: failed after {took:.2f} s: {msg.splitlines()[0][:200]}")


def check_absent_member(rank, notes):
    """Rank 1 issues an all_reduce on [1, 3] that rank 3 never issues: rank 1 fails at the group's timeout;
    rank 3's next call on the group (after rank 1 failed) fails too, naming rank 1 (its rank 0 in the group)."""
    members = [1, 3]
    g = dist.new_group(members, timeout=timedelta(seconds=GROUP_TIMEOUT_S))
    if rank == 1:
        words = ["hetccl allreduce", f"timed out after {GROUP_TIMEOUT_S} s", "receiving from rank 1"]
        msg, took = expect_error(lambda: dist.all_reduce(torch.ones(64), group=g), words,
                                 "an all_reduce one member never issues")
        if not GROUP_TIMEOUT_S - 1 <= took <= GROUP_TIMEOUT_S + 10:
            raise AssertionError(f"the waiting member failed after {took:.1f} s, the timeout is {GROUP_TIMEOUT_S} s")
        notes.append(f"absent member: the waiting one failed after {took:.1f} s: {msg.splitlines()[0][:200]}")
    dist.barrier()  # rank 1 has failed
    if rank == 3:
        # shm hands the failed rank's reason on; tcp only closes its connections
        words = ["hetccl allreduce", "rank 0"] + (["timed out"] if os.environ.get("HETCCL_TRANSPORT") == "shm" else [])
        msg, took = expect_error(lambda: dist.all_reduce(torch.ones(64), group=g), words,
                                 "the absent member's next call")
        if took > GROUP_TIMEOUT_S + 5:
            raise AssertionError(f"the absent member's next call took {took:.1f} s to fail")
        notes.append(f"absent member: its next call failed after {took:.2f} s: {msg.splitlines()[0][:200]}")


def check_spanning_subgroup(rank, notes):
    """A subgroup of three ranks across both vendor groups ([1, 2, 3]: one of a, both of b), with global ranks
    that are not its ranks: rooted calls from a root in each vendor group, all_to_all_single with uneven
    splits, and send/recv between members of different vendor groups, each against the values it must give."""
    members = [1, 2, 3]
    g = dist.new_group(members)
    if rank not in members:
        return
    me, n = members.index(rank), len(members)
    for root in (1, 3):  # global ranks: one in each vendor group
        t = torch.arange(7, dtype=torch.float32) * (rank + 1)
        dist.broadcast(t, src=root, group=g)
        if not torch.equal(t, torch.arange(7, dtype=torch.float32) * (root + 1)):
            raise AssertionError(f"broadcast from {root} in {members}: {t.tolist()}")
        t = torch.full((5,), float(rank))
        dist.reduce(t, dst=root, group=g)
        if rank == root and not bool((t == sum(members)).all()):
            raise AssertionError(f"reduce to {root} in {members}: {t.tolist()} (want {sum(members)})")
        parts = [torch.empty(3, dtype=torch.int64) for _ in members] if rank == root else None
        dist.gather(torch.full((3,), rank, dtype=torch.int64), gather_list=parts, dst=root, group=g)
        if rank == root and [int(p[0]) for p in parts] != members:
            raise AssertionError(f"gather to {root} in {members}: {[p.tolist() for p in parts]}")
        got = torch.empty(2, dtype=torch.int64)
        src = [torch.full((2,), 10 * r, dtype=torch.int64) for r in members] if rank == root else None
        dist.scatter(got, scatter_list=src, src=root, group=g)
        if int(got[0]) != 10 * rank:
            raise AssertionError(f"scatter from {root} in {members}: {got.tolist()} (want {10 * rank})")
    # all_to_all_single, uneven: member i sends i + j + 1 rows of value 100 * i + j to member j
    send_splits = [me + j + 1 for j in range(n)]
    recv_splits = [i + me + 1 for i in range(n)]
    inp = torch.cat([torch.full((k,), float(100 * me + j)) for j, k in enumerate(send_splits)])
    out = torch.empty(sum(recv_splits))
    dist.all_to_all_single(out, inp, output_split_sizes=recv_splits, input_split_sizes=send_splits, group=g)
    want = torch.cat([torch.full((k,), float(100 * i + me)) for i, k in enumerate(recv_splits)])
    if not torch.equal(out, want):
        raise AssertionError(f"all_to_all_single in {members}, member {me}: {out.tolist()} (want {want.tolist()})")
    # send/recv between the vendor groups: 1 (group a) and 3 (group b), both ways
    if rank in (1, 3):
        peer = 4 - rank
        mine, theirs = torch.full((9,), float(rank)), torch.empty(9)
        if rank == 1:
            dist.send(mine, dst=peer, group=g)
            dist.recv(theirs, src=peer, group=g)
        else:
            dist.recv(theirs, src=peer, group=g)
            dist.send(mine, dst=peer, group=g)
        if not bool((theirs == peer).all()):
            raise AssertionError(f"recv from {peer} in {members}: {theirs.tolist()}")
    notes.append(f"subgroup {members} across both vendor groups: broadcast, reduce, gather, scatter from roots 1 "
                 "and 3, uneven all_to_all_single, send/recv between the groups: right")


def worker(rank, world, port, groups, q):
    faulthandler.dump_traceback_later(100, exit=True)
    notes = []
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_DEVICE="host",
                          HETCCL_GROUP=groups[rank])
        torch.set_num_threads(1)
        import hetccl_torch  # noqa: F401  registers the backend
        dist.init_process_group("hetccl", rank=rank, world_size=world, timeout=timedelta(seconds=60))
        t0 = time.perf_counter()
        # every rank makes every group, in the same order
        tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
        dp_groups = [dist.new_group(members) for members in ([0, 2], [1, 3])]
        tp = (tp_groups[rank // 2], rank % 2)
        dp = (dp_groups[rank % 2], rank // 2)
        if groups[rank] != groups[rank ^ 1] or groups[rank] == groups[rank ^ 2]:
            raise AssertionError(f"groups {groups}: TP pairs must be inside a group, DP pairs across")
        check_training(rank, tp, dp, notes)
        check_unequal_lists(dp, notes)
        check_spanning_subgroup(rank, notes)
        check_mismatch(rank, notes)
        check_absent_member(rank, notes)
        dist.barrier()
        notes.append(f"checks took {time.perf_counter() - t0:.1f} s")
        q.put((rank, "ok", notes))
        q.close()
        q.join_thread()
        os._exit(0)  # subgroups failed on purpose: no orderly destroy
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}", notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", default="a,a,b,b", help="hetccl group of each of the 4 ranks")
    ap.add_argument("--deadline", type=int, default=110)
    args = ap.parse_args()
    groups = args.groups.split(",")
    if len(groups) != 4:
        sys.exit("sharded_subgroups: 4 ranks, one group name each")
    t0 = time.perf_counter()
    ok = spawn_and_collect(worker, 4, (free_port(), groups), args.deadline)
    print(f"sharded_subgroups: {'ok' if ok else 'FAILED'} ({time.perf_counter() - t0:.1f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
