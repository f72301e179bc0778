"""torch's watchdog aborts a hung communicator (ncclCommAbort from its own
thread) while a call of the main thread waits on the device: on hetccl's
libnccl.so.2 the waiting rank's work must end and its stream go on, never a
crash or a hang.

    hetccl-torch-run python3 tests/gpu/torch_watchdog_abort.py

Two processes on the one GPU, groups g0 and g1. Both run one all_reduce;
then rank 1 stops taking part (it sleeps), and rank 0 issues one more
all_reduce (async_op, as a training loop does), whose stream waits on
hetccl's completion flag. The watchdog times it out after 8 s and aborts
the communicator from its own thread (TORCH_NCCL_ASYNC_ERROR_HANDLING=2:
abort, do not kill the process); the abort must release the waiting stream
(the work ends, the device synchronises). The process must exit normally.
Prints "torch_watchdog_abort: ok".

The main thread issues no call after the abort: torch 2.11's watchdog holds
the work list's lock while it handles each failed work (sleeping), so an
enqueue then blocks in torch itself (ProcessGroupNCCL::workEnqueue),
whatever library is underneath. torch's flight recorder and its dump on
timeout are off (they spend seconds gathering stack traces before the
abort). Each step of rank 0 is stamped on stderr, and Python's stacks are
dumped if it is still running after 150 s, so a hang shows where it sits.
"""
import datetime
import faulthandler
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

from gpu_ranks import free_port, report, run_quiet_pair


def worker(rank, port, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_GROUP=f"g{rank}",
                          TORCH_NCCL_ASYNC_ERROR_HANDLING="2", TORCH_NCCL_DUMP_ON_TIMEOUT="0",
                          TORCH_FR_BUFFER_SIZE="0")
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev,
                                timeout=datetime.timedelta(seconds=8))
        x = torch.ones(1 << 20, device=dev)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        if rank == 1:
            time.sleep(150)  # gone quiet, alive: only the watchdog's abort ends rank 0's call
            report(q, rank, "ok", "")
            os._exit(0)
        faulthandler.dump_traceback_later(150, exit=False)
        t0 = time.time()

        def stamp(what):
            print(f"rank 0: {time.time() - t0:6.1f} s: {what}", file=sys.stderr, flush=True)

        work = dist.all_reduce(x, async_op=True)
        stamp("all_reduce enqueued; rank 1 is quiet")
        while not work.is_completed() and time.time() - t0 < 120:
            time.sleep(0.2)
        if not work.is_completed():
            report(q, rank, f"FAILED: the work did not end in {time.time() - t0:.0f} s (no abort, or it did not "
                   "release the stream)", "")
            os._exit(1)
        stamp("the work ended")
        # Under TORCH_NCCL_ASYNC_ERROR_HANDLING=2 torch records the timeout on
        # the work and logs it; wait() raises only under teardown (mode 1,
        # which kills the process), so the error is read, not caught.
        try:
            err = work.exception()
        except Exception as e:  # not every torch exposes it
            err = f"(work.exception() unavailable: {type(e).__name__})"
        torch.cuda.synchronize()  # the abort released the stream
        stamp("the device synchronised")
        report(q, rank, "ok", f"the aborted work ended after {time.time() - t0:.1f} s ({err})")
        os._exit(0)
    except Exception:
        report(q, rank, "FAILED: " + traceback.format_exc(), "")
        os._exit(1)


def main():
    run_quiet_pair("torch_watchdog_abort", worker, (free_port(),), 200)


if __name__ == "__main__":
    main()
