"""The arithmetic of a balanced plan, with no torch in it.

Each rank's compute time for a local batch of n samples is modelled as
t(n) = a + c * n seconds (a: what a step costs whatever its size, c: seconds
a sample). The plan gives each rank an integer share b_i of the global batch
B so that sum b_i = B, 1 <= b_i <= cap_i, and the slowest rank's t_i(b_i) is
as small as it can be. Every function here is deterministic: ranks that feed
it the same numbers get the same plan, bit for bit.
"""
import math


class BalanceError(ValueError):
    """Bad input or a disagreement between ranks, found before a step runs."""


def fit(points):
    """(a, c) from measured (n, seconds) points, newest last.

    Two points whose sizes differ by at least 25% give a line through both
    where its slope and intercept are not negative; otherwise the newest
    point alone gives a line through the origin (time proportional to n).
    """
    n1, t1 = points[-1]
    for n0, t0 in reversed(points[:-1]):
        if max(n0, n1) >= 1.25 * min(n0, n1):
            c = (t1 - t0) / (n1 - n0)
            a = t1 - c * n1
            if c > 0 and a >= 0 and math.isfinite(a) and math.isfinite(c):
                return a, c
            break
    return 0.0, t1 / n1 if n1 > 0 else math.inf


def step_time(model, n):
    a, c = model
    return a + c * n


def check_batch(global_batch, world):
    if global_batch < world:
        raise BalanceError(f"hetccl_torch.balance: the global batch of {global_batch} samples is smaller than the "
                           f"{world} ranks: every rank needs at least 1 sample a step")


def check(global_batch, models, caps, names):
    """Raises BalanceError naming the rank and the numbers when no plan can
    exist: fewer samples than ranks, a rank without a speed, or caps that
    cannot hold the global batch. names[i] says what rank i is (for messages)."""
    check_batch(global_batch, len(models))
    for i, (a, c) in enumerate(models):
        if not (c > 0 and math.isfinite(c) and a >= 0 and math.isfinite(a)):
            rate = 1.0 / c if c > 0 and math.isfinite(c) else 0.0
            raise BalanceError(f"hetccl_torch.balance: {names[i]} measured {rate:.6g} samples/s "
                               f"(a step of n samples takes {a:.6g} s + {c:.6g} s * n): it cannot take a share; "
                               f"check its step function, or leave the rank out")
    for i, cap in enumerate(caps):
        if cap < 1:
            raise BalanceError(f"hetccl_torch.balance: {names[i]} holds {cap} samples at most (its memory cap): "
                               f"every rank needs at least 1")
    if sum(min(cap, global_batch) for cap in caps) < global_batch:
        held = ", ".join(f"{names[i]}: {cap}" for i, cap in enumerate(caps))
        raise BalanceError(f"hetccl_torch.balance: the ranks' memory caps hold {sum(caps)} samples a step, fewer than "
                           f"the global batch of {global_batch} ({held}): lower the global batch or add ranks")


def shares(global_batch, models, caps):
    """Integer shares: sum = global_batch, 1 <= share <= cap, the slowest rank as fast as can be.

    First the continuous solution (every rank not at a bound finishes at the
    same time T, found by bisection), then whole samples: the floors, and the
    samples left over go one at a time to the rank that would finish
    soonest with one more (ties: the lower rank).
    """
    world = len(models)
    caps = [min(cap, global_batch) for cap in caps]

    def amount(t):
        return sum(min(max((t - a) / c, 1.0), cap) for (a, c), cap in zip(models, caps))

    lo, hi = 0.0, max(step_time(m, cap) for m, cap in zip(models, caps))
    for _ in range(200):
        mid = (lo + hi) / 2
        if amount(mid) < global_batch:
            lo = mid
        else:
            hi = mid
    out = [int(min(max(math.floor((hi - a) / c), 1), cap)) for (a, c), cap in zip(models, caps)]
    while sum(out) < global_batch:
        best = min((i for i in range(world) if out[i] < caps[i]), key=lambda i: (step_time(models[i], out[i] + 1), i))
        out[best] += 1
    while sum(out) > global_batch:
        worst = max((i for i in range(world) if out[i] > 1), key=lambda i: (step_time(models[i], out[i]), -i))
        out[worst] -= 1
    return out


def makespan(models, plan):
    """The predicted compute time of a step: the slowest rank's."""
    return max(step_time(m, b) for m, b in zip(models, plan))


def equal_split(global_batch, world):
    """What an equal split gives each rank (the first ranks take the remainder)."""
    base, extra = divmod(global_batch, world)
    return [base + (1 if i < extra else 0) for i in range(world)]


def offsets(plan):
    """Where each rank's rows start in the global batch (ranks in order)."""
    out, at = [], 0
    for b in plan:
        out.append(at)
        at += b
    return out
