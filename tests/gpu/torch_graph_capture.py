"""An all_reduce across two groups captured in a torch.cuda.CUDAGraph
through hetccl's libnccl.so.2 (the drop-in), replayed with new inputs and
compared with the same all_reduce run eagerly.

    hetccl-torch-run python3 tests/gpu/torch_graph_capture.py

Two processes on the one GPU, groups g0 and g1, so every call crosses
between groups (hetccl's captured calls: docs/design-gpu-graphs.md). Each
rank warms the communicator up eagerly (torch's rule before a capture),
captures `y = x * 2; all_reduce(y); z = y + 1` on a side stream, then for
20 steps fills x with that step's values, replays the graph and checks z
against an eager all_reduce of the same input. Then a second graph (an
all_gather) is interleaved with the first, and both graphs are deleted
while the communicator goes on eagerly. Prints "torch_graph_capture: ok".
Needs a GPU: it has not run on the machines that build hetccl's CI.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gpu_ranks import free_port


def worker(rank, port, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=f"g{rank}")
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev,
                                timeout=datetime.timedelta(seconds=60))
        n = 1 << 16
        x = torch.zeros(n, device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up, eager, on the stream the capture uses
            for _ in range(3):
                y = x * 2
                dist.all_reduce(y)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()

        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
            dist.all_reduce(y)
            z = y + 1
        gathered = torch.empty(2 * n, device=dev)
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            dist.all_gather_into_tensor(gathered, z)

        for step in range(20):
            x.copy_(torch.arange(n, device=dev, dtype=torch.float32) * (rank + 1) + step)
            g.replay()
            if step % 4 == 3:
                g2.replay()
            want = x * 2
            dist.all_reduce(want)  # eager, after the replay on the same stream
            want += 1
            torch.cuda.synchronize()
            if not torch.equal(z, want):
                bad = (z != want).nonzero()[0].item()
                raise AssertionError(f"step {step}: replayed {z[bad].item()} != eager {want[bad].item()} at {bad}")
            if step % 4 == 3 and not torch.equal(gathered[rank * n:(rank + 1) * n], z):
                raise AssertionError(f"step {step}: the all_gather graph did not gather this step's z")
        del g, g2
        torch.cuda.synchronize()
        t = torch.ones(4, device=dev)
        dist.all_reduce(t)  # the communicator goes on without the graphs
        torch.cuda.synchronize()
        if t.tolist() != [2.0] * 4:
            raise AssertionError(f"eager all_reduce after the graphs went: {t.tolist()}")
        dist.destroy_process_group()
        q.put((rank, "ok"))
    except Exception as e:  # reported by the parent
        q.put((rank, f"FAILED: {type(e).__name__}: {e}"))


def main():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(q.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(60)
    failed = {r: v for r, v in results.items() if v != "ok"}
    if failed:
        for r, v in sorted(failed.items()):
            print(f"rank {r}: {v}", file=sys.stderr)
        sys.exit(1)
    print("torch_graph_capture: ok")


if __name__ == "__main__":
    main()
