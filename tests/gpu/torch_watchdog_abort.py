"""torch's watchdog aborts a hung communicator (ncclCommAbort from its own
thread) while the main thread waits and then makes its next call: on
hetccl's libnccl.so.2 that must end in a Python exception on the waiting
rank, never a crash or a hang.

    hetccl-torch-run python3 tests/gpu/torch_watchdog_abort.py

Two processes on the one GPU, groups g0 and g1. Both run one all_reduce;
then rank 1 stops taking part (it sleeps), and rank 0 keeps issuing
all_reduce calls (async_op, as a training loop does) while its first one
hangs. The watchdog times it out after 8 s and aborts the communicator from
its own thread (TORCH_NCCL_ASYNC_ERROR_HANDLING=2: abort, do not kill the
process) while the main thread's calls go on: one of those must raise, and
the process must exit normally. Prints "torch_watchdog_abort: ok".
"""
import datetime
import os
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(q, *item):
    q.put(item)
    q.close()
    q.join_thread()  # flushed before os._exit, which skips the queue's own flush


def worker(rank, port, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=f"g{rank}",
                          TORCH_NCCL_ASYNC_ERROR_HANDLING="2")
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev,
                                timeout=datetime.timedelta(seconds=8))
        x = torch.ones(1 << 20, device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        if rank == 1:
            time.sleep(40)  # gone quiet: rank 0's next call hangs
            report(q, rank, "ok", "")
            os._exit(0)
        t0 = time.time()
        raised = None
        calls = 0
        while time.time() - t0 < 40 and raised is None:
            try:
                dist.all_reduce(x, async_op=True)
                calls += 1
                time.sleep(0.05)
            except Exception as e:  # the watchdog aborted the communicator
                raised = f"{type(e).__name__}: {str(e)[:160]}"
        waited = time.time() - t0
        if raised is None:
            report(q, rank, f"FAILED: {calls} calls in {waited:.0f} s, none raised", "")
        else:
            report(q, rank, "ok", f"call {calls + 1} raised after {waited:.1f} s: {raised}")
        os._exit(0)
    except Exception:
        report(q, rank, "FAILED: " + traceback.format_exc(), "")
        os._exit(1)


def main():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.time() + 120
    while len(results) < 2 and time.time() < deadline:
        try:
            r, status, detail = q.get(timeout=5)
            results[r] = (status, detail)
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    ok = len(results) == 2 and all(s == "ok" for s, _ in results.values())
    for p in procs:
        print(f"process {procs.index(p)}: exit code {p.exitcode}")
        ok = ok and p.exitcode == 0  # a crash (negative: a signal) fails
    for r in sorted(results):
        print(f"rank {r}: {results[r][0]} {results[r][1]}")
    print("torch_watchdog_abort: ok" if ok else "torch_watchdog_abort: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
