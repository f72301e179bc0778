"""One worker of a multi-node torchrun job on emulated hosts
(check_torchrun.py): the native "hetccl" backend initialised from torchrun's
environment alone, collectives checked, one line per rank:
  torchrun_job: ok rank R of W on HOST, group G
"""
import os
import socket
import sys

import torch
import torch.distributed as dist

import hetccl_torch  # noqa: F401  registers the backend


def main():
    dist.init_process_group("hetccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    n = (1 << 18) + 5
    t = torch.full((n,), float(rank + 1))
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    assert torch.all(t == want), f"all_reduce: {t[:4]} != {want}"
    b = torch.arange(n, dtype=torch.float32) if rank == world - 1 else torch.zeros(n)
    dist.broadcast(b, src=world - 1)
    assert torch.equal(b, torch.arange(n, dtype=torch.float32)), "broadcast"
    parts = [torch.zeros(1000) for _ in range(world)]
    dist.all_gather(parts, torch.full((1000,), float(rank)))
    assert all(torch.all(p == r) for r, p in enumerate(parts)), "all_gather"
    dist.barrier()
    group = os.environ.get("HETCCL_GROUP_MAP", "")
    print(f"torchrun_job: ok rank {rank} of {world} on {socket.gethostname()}, local rank "
          f"{os.environ['LOCAL_RANK']}, map {group}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
