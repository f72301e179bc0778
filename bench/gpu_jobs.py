"""What the GPU benchmarks that start two processes on one GPU share: the
processes started with an environment of their own (LD_PRELOAD of the
drop-in, CUDA_* variables, which must be set before CUDA starts), the first
result collected, a DDP step with and without its exchange, and the MPS
control daemon for runs under MPS.
"""
import os
import subprocess
import time

import torch.multiprocessing as mp


def run_ranks(target, args_of, env, timeout, ranks=2, unset=()):
    """Starts `ranks` spawned processes of target(*args_of(rank), queue), each
    with this process's environment plus `env` less `unset`, and returns the
    first thing one puts on the queue (rank 0 puts its results); raises
    SystemExit if a process exits with an error or nothing comes in time."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    saved = dict(os.environ)
    os.environ.update(env)  # the spawned interpreters start with it
    for name in unset:
        os.environ.pop(name, None)
    try:
        procs = [ctx.Process(target=target, args=(*args_of(r), q)) for r in range(ranks)]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        res = q.get(timeout=timeout)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"a worker exited with {[p.exitcode for p in procs]}")
    return res


def ddp_step(ddp, opt, x):
    """One training step of DDP model `ddp` on input x (loss: the mean square
    of its output), as a function of whether the gradients are exchanged
    (False: DDP's no_sync)."""

    def step(sync):
        opt.zero_grad(set_to_none=True)
        if sync:
            ddp(x).square().mean().backward()
        else:
            with ddp.no_sync():
                ddp(x).square().mean().backward()
        opt.step()

    return step


class Mps:
    """The MPS control daemon for the runs inside (its own pipe and log
    folders, named by `name`); quit after."""

    def __init__(self, name):
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": f"/tmp/hetccl-{name}-mps-pipe",
                    "CUDA_MPS_LOG_DIRECTORY": f"/tmp/hetccl-{name}-mps-log"}

    def __enter__(self):
        for d in self.env.values():
            os.makedirs(d, exist_ok=True)
        subprocess.run(["nvidia-cuda-mps-control", "-d"], check=True, env={**os.environ, **self.env})
        return self

    def __exit__(self, *exc):
        subprocess.run(["nvidia-cuda-mps-control"], input=b"quit\n", env={**os.environ, **self.env})
        time.sleep(1)
