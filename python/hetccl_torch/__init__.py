"""hetccl as a torch.distributed backend.

    import hetccl_torch                      # registers the "hetccl" backend
    torch.distributed.init_process_group("hetccl")

One process group serves CPU and CUDA tensors. Each rank is a GPU rank
(collectives in CUDA stream order, on a side stream, like the nccl backend)
or a host rank (collectives complete before they return, like gloo's):
HETCCL_DEVICE=cuda|host chooses, and by default a process that sees a CUDA
device is a GPU rank (call torch.cuda.set_device first). HETCCL_GROUP names
the rank's vendor group (default: its device kind); the communicator's other
settings are hetccl's own HETCCL_* variables (`hetccl-info` lists them).
"""
import inspect
import os

import torch
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "rank_device", "hetccl_version", "monitored_barrier"]

BACKEND = "hetccl"
hetccl_version = _C.hetccl_version


def rank_device():
    """The device kind this process's ranks use: "cuda" or "host"."""
    kind = os.environ.get("HETCCL_DEVICE", "").strip().lower()
    if kind in ("", "auto"):
        return "cuda" if torch.cuda.is_available() else "host"
    if kind not in ("cuda", "host"):
        raise ValueError(f"HETCCL_DEVICE={kind!r}: hetccl_torch supports 'cuda' and 'host'")
    return kind


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for hetccl process groups.

    torch's own function accepts only gloo groups; this one calls the
    group's monitored barrier, which hetccl implements through the store:
    rank 0 raises naming the first rank (every rank, with wait_all_ranks)
    that did not arrive within `timeout` (default: the group's timeout), and
    the other ranks raise when rank 0 does not release them in that time.
    """
    from datetime import timedelta
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if timeout is None:
        timeout = getattr(dist, "default_pg_timeout", timedelta(minutes=30))
    return pg.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout, rank_device(), os.environ.get("HETCCL_GROUP", ""))


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    kwargs = {}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


_register()
