"""What the two-process torch scripts of tests/gpu share: a free port for the
rendezvous, a report that reaches the parent before os._exit, and the parent
side of a pair whose rank 1 goes quiet (rank 0 reports; rank 1 is killed)."""
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(q, *item):
    q.put(item)
    q.close()
    q.join_thread()  # flushed before os._exit, which skips the queue's own flush


def run_quiet_pair(name, worker, args, wait_s):
    """Starts worker(rank, *args, q) for ranks 0 and 1 (spawned), waits up to
    wait_s for rank 0's (rank, status, detail), kills rank 1 (it stays quiet
    on purpose), prints both and exits 0 only if rank 0 said "ok" and exited 0
    (a crash, a negative exit code, fails)."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, *args, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.time() + wait_s
    while 0 not in results and time.time() < deadline:
        try:
            r, status, detail = q.get(timeout=5)
            results[r] = (status, detail)
        except Exception:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    for p in procs:
        p.join(timeout=5 if p is procs[1] else 60)
        if p.is_alive():
            p.kill()
    ok = 0 in results and results[0][0] == "ok" and procs[0].exitcode == 0
    for i, p in enumerate(procs):
        print(f"process {i}: exit code {p.exitcode}")
    for r in sorted(results):
        print(f"rank {r}: {results[r][0]} {results[r][1]}")
    print(f"{name}: ok" if ok else f"{name}: FAILED")
    sys.exit(0 if ok else 1)
