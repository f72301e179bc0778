"""torch's own flight recorder over hetccl's libnccl.so.2: the records of
calls across two groups, and the dump a stalled rank leaves on timeout.

    hetccl-torch-run python3 tests/gpu/torch_flight_recorder.py

Needs a GPU and PyTorch 2.x with torch's nccl backend (the GPU machine; it
cannot run where CI runs: Debian's torch 1.13 has no CUDA). Two processes on
the one GPU, groups g0 and g1, with the flight recorder on
(TORCH_FR_BUFFER_SIZE and its older name TORCH_NCCL_TRACE_BUFFER_SIZE),
TORCH_NCCL_DUMP_ON_TIMEOUT=1 and TORCH_NCCL_ASYNC_ERROR_HANDLING=2.

1. Both ranks run three all_reduce, an all_gather_into_tensor and a
   reduce_scatter_tensor across the groups. Each reads its recorder in
   process (torch's _dump_nccl_trace) and checks that every call is there,
   in order, with its sizes, and completed.
2. Rank 1 goes quiet; rank 0 issues one more all_reduce. torch's watchdog
   times it out (8 s) and writes rank 0's dump to
   TORCH_NCCL_DEBUG_INFO_TEMP_FILE + "0". The dump must name the stalled
   all_reduce (its sequence number after the five above) and not call it
   completed: what torch's analyzer reads to name the stalled call.
Prints "torch_flight_recorder: ok".
"""
import datetime
import os
import pickle
import tempfile
import time
import traceback

import torch
import torch.distributed as dist

from gpu_ranks import free_port, report, run_quiet_pair

N = 1 << 16  # elements per rank


def read_recorder():
    """The recorder's entries of this process, as torch's dump gives them."""
    c10d = torch._C._distributed_c10d
    dump = getattr(c10d, "_dump_nccl_trace", None) or getattr(c10d, "_dump_fr_trace", None)
    if dump is None:
        raise RuntimeError(f"torch {torch.__version__} has no in-process flight recorder dump")
    return pickle.loads(dump())["entries"]


def coll_entries(entries):
    return [e for e in entries if not e.get("is_p2p", False) and "nccl:" in e.get("profiling_name", "")]


def check_first_calls(rank):
    """Phase 1's calls as the recorder holds them, once the watchdog retired them."""
    want = ["all_reduce", "all_reduce", "all_reduce", "all_gather", "reduce_scatter"]
    end = time.time() + 20
    while True:
        got = coll_entries(read_recorder())
        names = [e["profiling_name"] for e in got]
        done = [e.get("state") == "completed" for e in got]
        if len(got) >= len(want) and all(done[-len(want):]):
            break
        if time.time() > end:
            raise AssertionError(f"rank {rank}: recorder holds {names} with states "
                                 f"{[e.get('state') for e in got]}; want {want}, all completed")
        time.sleep(0.2)
    last = got[-len(want):]
    for e, w in zip(last, want):
        if w not in e["profiling_name"]:
            raise AssertionError(f"rank {rank}: recorder has {e['profiling_name']} where {w} was called "
                                 f"(all: {[x['profiling_name'] for x in last]})")
    seqs = [e["collective_seq_id"] for e in last]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        raise AssertionError(f"rank {rank}: collective sequence numbers {seqs} are not increasing")
    ar = last[0]
    if list(ar["input_sizes"][0]) != [N]:
        raise AssertionError(f"rank {rank}: all_reduce recorded with input sizes {ar['input_sizes']}, want [[{N}]]")
    return seqs[-1]


def worker(rank, port, prefix, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=f"g{rank}",
                          TORCH_NCCL_ASYNC_ERROR_HANDLING="2", TORCH_NCCL_DUMP_ON_TIMEOUT="1",
                          TORCH_FR_BUFFER_SIZE="64", TORCH_NCCL_TRACE_BUFFER_SIZE="64",
                          TORCH_NCCL_DEBUG_INFO_TEMP_FILE=prefix)
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev,
                                timeout=datetime.timedelta(seconds=8))
        x = torch.full((N,), float(rank + 1), device=dev)
        for _ in range(3):
            dist.all_reduce(x)
        out = torch.empty(2 * N, device=dev)
        dist.all_gather_into_tensor(out, x)
        rs = torch.empty(N // 2, device=dev)
        dist.reduce_scatter_tensor(rs, out[:N])
        torch.cuda.synchronize()
        want = 3.0 * 2 ** 2 * 2  # (1+2) summed, doubled twice, then summed over 2 ranks by the reduce_scatter
        if not bool((rs == want).all()):
            raise AssertionError(f"rank {rank}: reduce_scatter gives {rs[0].item()}, want {want}")
        last_seq = check_first_calls(rank)
        dist.barrier()
        torch.cuda.synchronize()
        if rank == 1:
            time.sleep(150)  # quiet and alive: rank 0's next call stalls on it
            report(q, rank, "ok", "")
            os._exit(0)
        t0 = time.time()
        work = dist.all_reduce(x, async_op=True)
        path = prefix + "0"
        while not os.path.exists(path) and time.time() - t0 < 120:
            time.sleep(0.5)
        if not os.path.exists(path):
            report(q, rank, f"FAILED: no dump at {path} {time.time() - t0:.0f} s after the stalled all_reduce", "")
            os._exit(1)
        time.sleep(2)  # the file is written, then closed
        with open(path, "rb") as f:
            entries = coll_entries(pickle.load(f)["entries"])
        stalled = [e for e in entries if e["collective_seq_id"] > last_seq]
        if not stalled or "all_reduce" not in stalled[-1]["profiling_name"]:
            report(q, rank, f"FAILED: the dump does not name the stalled all_reduce after sequence {last_seq}: "
                   f"{[(e['profiling_name'], e['collective_seq_id'], e.get('state')) for e in entries[-4:]]}", "")
            os._exit(1)
        if stalled[-1].get("state") == "completed":
            report(q, rank, "FAILED: the dump calls the stalled all_reduce completed", "")
            os._exit(1)
        detail = (f"dump after {time.time() - t0:.1f} s names {stalled[-1]['profiling_name']} "
                  f"seq {stalled[-1]['collective_seq_id']} state {stalled[-1].get('state')}")
        end = time.time() + 60
        while not work.is_completed() and time.time() < end:
            time.sleep(0.2)
        if not work.is_completed():
            report(q, rank, "FAILED: the stalled work did not end after the timeout (no abort)", detail)
            os._exit(1)
        report(q, rank, "ok", detail)
        os._exit(0)
    except Exception:
        report(q, rank, "FAILED: " + traceback.format_exc(), "")
        os._exit(1)


def main():
    prefix = os.path.join(tempfile.mkdtemp(prefix="hetccl_fr_"), "fr_rank_")
    print(f"dumps under {os.path.dirname(prefix)}")
    run_quiet_pair("torch_flight_recorder", worker, (free_port(), prefix), 240)


if __name__ == "__main__":
    main()
