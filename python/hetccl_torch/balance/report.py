"""Is each group worth its place? The predicted step with every group, with
an equal split, and without each group in turn: compute (the slowest rank's
time at its share, from the measured speeds) plus the gradient exchange
(measured: links.py). The exchange is counted in full, as if nothing of it
overlapped the backward, so every prediction is an upper bound of the same
kind and they compare fairly."""
from . import solve


def _ranks_text(ranks):
    ranks = sorted(ranks)
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(str(r) for r in ranks)


def layouts(labels):
    """The rank sets to price: the whole job, and the job less each group (in name order)."""
    everyone = tuple(range(len(labels)))
    out = [everyone]
    for name in sorted(set(labels)):
        rest = tuple(i for i in everyone if labels[i] != name)
        if rest and rest not in out:
            out.append(rest)
    return out


def predict(global_batch, models, caps, ranks):
    """(shares, compute seconds) of the best plan on `ranks` alone, or None where they cannot hold the batch."""
    m = [models[i] for i in ranks]
    c = [caps[i] for i in ranks]
    if global_batch < len(ranks) or sum(min(x, global_batch) for x in c) < global_batch:
        return None
    plan = solve.shares(global_batch, m, c)
    return plan, solve.makespan(m, plan)


def build(global_batch, models, caps, cap_sources, labels, kinds, plan, costs, nbytes, backend):
    """(text, numbers): the report, and its predictions in seconds."""
    world = len(models)
    everyone = tuple(range(world))
    exchange = costs.get(everyone)
    numbers = {"compute_s": solve.makespan(models, plan), "exchange_s": exchange, "without": {}}
    numbers["step_s"] = numbers["compute_s"] + (exchange or 0.0)
    equal = solve.equal_split(global_batch, world)
    numbers["equal_compute_s"] = solve.makespan(models, equal)
    groups = sorted(set(labels))
    lines = [f"hetccl_torch.balance: global batch {global_batch} on {world} ranks in {len(groups)} group"
             f"{'s' if len(groups) != 1 else ''}: shares {plan}"]
    for i, (model, b) in enumerate(zip(models, plan)):
        t = solve.step_time(model, b)
        cap = "" if cap_sources[i] == "none" else f", cap {caps[i]} ({cap_sources[i]})"
        lines.append(f"  rank {i} ({labels[i]}, {kinds[i]}): {b / t:.1f} samples/s at {b} samples, "
                     f"compute {1e3 * t:.2f} ms{cap}")
    how = (f"an all_reduce of {_size(nbytes)} timed through the {backend} backend" if exchange is not None
           else "not measured")
    lines.append(f"  a step: {1e3 * numbers['compute_s']:.2f} ms compute + "
                 f"{_ms(exchange)} gradient exchange ({how}) = {_ms(numbers['step_s'])}; "
                 f"an equal split: {1e3 * numbers['equal_compute_s']:.2f} ms compute + {_ms(exchange)}")
    verdicts = []
    for name in groups:
        rest = tuple(i for i in everyone if labels[i] != name)
        if not rest:
            continue
        gone = _ranks_text([i for i in everyone if labels[i] == name])
        best = predict(global_batch, models, caps, rest)
        if best is None:
            lines.append(f"  without group {name} ({gone}): the other ranks cannot hold the global batch")
            continue
        cost = 0.0 if len(rest) == 1 else costs.get(rest)
        if cost is None:
            lines.append(f"  without group {name} ({gone}): {1e3 * best[1]:.2f} ms compute, exchange not measured")
            continue
        alone = best[1] + cost
        numbers["without"][name] = alone
        gain = alone / numbers["step_s"]
        note = "one rank, no exchange" if len(rest) == 1 else _ranks_text(rest)
        lines.append(f"  without group {name} ({gone}): {1e3 * best[1]:.2f} ms compute + {_ms(cost)} ({note}) = "
                     f"{_ms(alone)}: with it the job is {gain:.2f}x as fast")
        if gain < 1.0:
            verdicts.append((name, gone, alone, gain))
    for name, gone, alone, gain in verdicts:
        lines.append(f"  => group {name} ({gone}) costs more than it gives: without it a step takes {_ms(alone)} "
                     f"instead of {_ms(numbers['step_s'])} ({1 / gain:.2f}x the throughput); leave it out")
    if not verdicts and len(groups) > 1:
        lines.append("  => every group pays for its place")
    numbers["costs_more"] = [v[0] for v in verdicts]
    return "\n".join(lines), numbers


def _ms(seconds):
    return "? ms" if seconds is None else f"{1e3 * seconds:.2f} ms"


def _size(nbytes):
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB"
    return f"{nbytes / 1024:.1f} KiB"
