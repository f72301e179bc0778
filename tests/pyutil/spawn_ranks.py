"""Runs one process per rank and collects what each puts on the queue,
without hanging on a rank that died or stalled (shared by the torch tests
and train_gpt.py)."""
import queue
import time


def collect(procs, q, deadline_s):
    """Results (rank, status, ...) from q, one per process; a process that
    exits without reporting, or the deadline, ends the wait with a FAILED
    entry naming it (a negative exit code is the signal that killed it)."""
    results, reported = [], set()
    end = time.monotonic() + deadline_s
    while len(results) < len(procs):
        try:
            r = q.get(timeout=1.0)
            results.append(r)
            reported.add(r[0])
            continue
        except queue.Empty:
            pass
        for rank, p in enumerate(procs):
            if rank not in reported and p.exitcode is not None:
                time.sleep(0.5)  # its last report may still be in flight
                try:
                    while True:
                        r = q.get_nowait()
                        results.append(r)
                        reported.add(r[0])
                except queue.Empty:
                    pass
                if rank not in reported:
                    results.append((rank, f"FAILED: exited with code {p.exitcode} without reporting"))
                    reported.add(rank)
        if time.monotonic() > end:
            for rank in range(len(procs)):
                if rank not in reported:
                    results.append((rank, f"FAILED: no report within {deadline_s} s"))
            break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    return results


def spawn_and_collect(worker, nranks, args, deadline_s):
    """Spawns worker(rank, nranks, *args, q) for every rank, collects the
    reports (rank, status[, notes]), prints each rank's status and notes, and
    returns whether every rank said "ok"."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, nranks, *args, q)) for r in range(nranks)]
    for p in procs:
        p.start()
    results = collect(procs, q, deadline_s)
    for r in sorted(results, key=lambda r: r[0]):
        print(f"rank {r[0]}: {r[1]}")
        for note in (r[2] if len(r) > 2 else []):
            print(f"  {note}")
    return len(results) == nranks and all(r[1] == "ok" for r in results)
