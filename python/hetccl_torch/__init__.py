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

__all__ = ["BACKEND", "rank_device", "hetccl_version"]

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
