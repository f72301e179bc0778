"""Times torch.distributed all_reduce (backend "nccl") in one process on one
GPU, for bench/torch_dropin_overhead.sh: run it with and without hetccl's
drop-in preloaded, and compare. Prints one JSON object: size in bytes ->
median microseconds per call over `iters` calls, each timed alone with CUDA
events after `warmup` calls."""
import json
import os
import sys

import torch
import torch.distributed as dist


def main():
    iters = int(os.environ.get("ITERS", "200"))
    warmup = int(os.environ.get("WARMUP", "20"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", sys.argv[1] if len(sys.argv) > 1 else "29511")
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=dev)
    out = {}
    for nbytes in [8, 1024, 65536, 1 << 20, 16 << 20, 256 << 20]:
        x = torch.ones(max(1, nbytes // 4), device=dev)
        for _ in range(warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times = []
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(iters):
            start.record()
            dist.all_reduce(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        times.sort()
        out[nbytes] = times[len(times) // 2]
    # Host-side cost of one call (what the CUDA events above do not see):
    # back-to-back 8-byte calls, then one synchronize.
    x = torch.ones(2, device=dev)
    import time
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters * 10):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    out["host_us_per_8B_call"] = (time.perf_counter() - t0) / (iters * 10) * 1e6
    if os.environ.get("PROFILE"):
        # Where the host time of a small call goes, as torch's profiler sees it.
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(iters):
                dist.all_reduce(x)
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12), file=sys.stderr)
    dist.destroy_process_group()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
