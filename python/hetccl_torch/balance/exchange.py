"""The small collectives of a plan: every rank's numbers to every rank, in one
all_gather of a fixed-size float64 vector, through whatever backend the
process group has (hetccl, nccl on hetccl's drop-in, gloo)."""
import os
import zlib

import torch
import torch.distributed as dist

from .solve import BalanceError

# Fields of the vector each rank contributes.
FIELDS = ("version", "global_batch", "replan_every", "a", "c", "cap", "cap_source", "verified", "can_probe",
          "measured_n", "step", "epoch", "checksum", "cuda", "failed")
LABEL_BYTES = 32
VERSION = 1.0
CAP_GIVEN, CAP_FOUND, CAP_NONE = 1.0, 2.0, 0.0


def device_for(group):
    """Where a collective's tensor must live: CUDA for the nccl backend, else the host."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def rank_label(kind):
    """The rank's group name: HETCCL_GROUP, or this rank's entry of HETCCL_GROUP_MAP
    ("0-1:a,2-3:b"), or its device kind ("cuda", "host")."""
    if os.environ.get("HETCCL_GROUP"):
        return os.environ["HETCCL_GROUP"]
    rank = dist.get_rank()
    for item in os.environ.get("HETCCL_GROUP_MAP", "").split(","):
        ranks, _, name = item.partition(":")
        lo, _, hi = ranks.partition("-")
        try:
            if int(lo) <= rank <= int(hi or lo):
                return name.strip()
        except ValueError:
            continue
    return kind


def gather(values, label, group):
    """Every rank's (values, label): values a dict of FIELDS (missing ones 0)."""
    world = dist.get_world_size(group)
    vec = torch.zeros(len(FIELDS) + LABEL_BYTES, dtype=torch.float64)
    for i, name in enumerate(FIELDS):
        vec[i] = float(values.get(name, 0.0))
    raw = label.encode()[:LABEL_BYTES]
    vec[len(FIELDS):len(FIELDS) + len(raw)] = torch.tensor(list(raw), dtype=torch.float64)
    dev = device_for(group)
    outs = [torch.empty_like(vec, device=dev) for _ in range(world)]
    dist.all_gather(outs, vec.to(dev), group=group)
    rows = []
    for out in outs:
        out = out.cpu()
        row = {name: out[i].item() for i, name in enumerate(FIELDS)}
        text = bytes(int(x) for x in out[len(FIELDS):].tolist() if x > 0).decode(errors="replace")
        rows.append((row, text))
    return rows


def checksum(epoch, plan):
    """A 32-bit digest of a plan (exact in a float64)."""
    return float(zlib.crc32(repr((int(epoch), [int(b) for b in plan])).encode()))


def same_everywhere(rows, field, what, step=None):
    """Raises BalanceError naming the ranks whose `field` differs from rank 0's."""
    want = rows[0][0][field]
    odd = [i for i, (row, _) in enumerate(rows) if row[field] != want]
    if odd:
        at = f" at step {step}" if step is not None else ""
        got = ", ".join(f"rank {i}: {_number(rows[i][0][field])}" for i in odd)
        raise BalanceError(f"hetccl_torch.balance: ranks disagree on {what}{at}: rank 0 has {_number(want)}, {got}; "
                           f"every rank must build the plan with the same arguments and step through it together")


def _number(v):
    return str(int(v)) if float(v).is_integer() else f"{v:g}"
