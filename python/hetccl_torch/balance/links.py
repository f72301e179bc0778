"""What a step's gradient exchange costs: an all_reduce of the gradient's
size, timed through the job's own process group (so through hetccl's group
libraries and its border where the backend is hetccl or the drop-in), on all
ranks and on each set of ranks the worth-it report considers."""
import statistics
import time

import torch
import torch.distributed as dist

from .exchange import device_for

PROBE_BYTES = 64 << 20  # larger gradients are timed at this size and scaled (bandwidth-bound there)


def _time_allreduce(nbytes, group, device, iters):
    probe = max(min(nbytes, PROBE_BYTES), 4)
    x = torch.zeros(probe // 4, dtype=torch.float32, device=device)
    times = []
    for i in range(iters + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        dist.all_reduce(x, group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * nbytes / probe


def exchange_costs(nbytes, sets, device, group=None, iters=3):
    """Seconds of one all_reduce of nbytes on each rank set in `sets` (tuples of
    ranks of the default group; the whole job among them), the slowest
    member's. A set of one rank costs 0. Every rank must call this with the
    same sets (new process groups are made for the smaller ones)."""
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    found = torch.zeros(len(sets), dtype=torch.float64)
    for k, ranks in enumerate(sets):
        if len(ranks) < 2:
            continue
        if len(ranks) == world:
            found[k] = _time_allreduce(nbytes, group, device, iters)
            continue
        # Every rank joins one of two groups, the set and the others, so that
        # each process makes one backend: hetccl_torch numbers its backends per
        # process, and a rank left out of a new group would fall out of step.
        others = [r for r in range(world) if r not in ranks]
        sub = dist.new_group(list(ranks))
        rest = dist.new_group(others)
        if rank in ranks:
            found[k] = _time_allreduce(nbytes, sub, device, iters)
        for g in (sub, rest):
            if g != dist.GroupMember.NON_GROUP_MEMBER:
                dist.destroy_process_group(g)
    dev = device_for(group)
    found = found.to(dev)
    dist.all_reduce(found, op=dist.ReduceOp.MAX, group=group)
    return {ranks: found[k].item() for k, ranks in enumerate(sets)}
