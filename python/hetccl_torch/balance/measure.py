"""How fast this rank computes: trial steps before training (with a back-off
on out-of-memory) and, during training, each step's compute time taken from
hooks the step already passes through (no extra synchronisation)."""
import contextlib
import statistics
import time

import torch


def is_out_of_memory(exc):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


@contextlib.contextmanager
def _fsdp_no_sync(model):
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


class Trial:
    """Runs the user's step function (forward and backward of n samples) with
    the gradient exchange off (DDP's no_sync), times it, and finds the
    largest n that fits in memory. Gradients are cleared after every use."""

    def __init__(self, step_fn, model, device):
        self.step_fn = step_fn
        self.model = model
        self.cuda = device.type == "cuda"
        self.device = device
        self.largest_ok = 0  # the largest n that ran
        self.smallest_oom = None  # the smallest n that ran out of memory
        self.seconds = 0.0  # wall time spent in trials

    def _quiet(self):
        no_sync = getattr(self.model, "no_sync", None)  # DDP
        if no_sync is not None:
            return no_sync()
        if hasattr(self.model, "set_requires_gradient_sync"):  # FSDP2: no reduce-scatter
            return _fsdp_no_sync(self.model)
        return contextlib.nullcontext()

    def _clear(self):
        if self.model is not None:
            for p in self.model.parameters():
                p.grad = None
        if self.cuda:
            torch.cuda.empty_cache()

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def run(self, n, steps):
        """Median seconds of `steps` timed steps at n (after one untimed), or
        None when n runs out of memory (then smallest_oom is n or less)."""
        t_start = time.perf_counter()
        times = []
        try:
            with self._quiet():
                for i in range(steps + 1):
                    self._sync()
                    t0 = time.perf_counter()
                    self.step_fn(n)
                    self._sync()
                    if i:
                        times.append(time.perf_counter() - t0)
        except Exception as e:  # only out-of-memory is handled; anything else is the step's own error
            if not is_out_of_memory(e):
                raise
            self.smallest_oom = n if self.smallest_oom is None else min(self.smallest_oom, n)
            return None
        finally:
            self._clear()
            self.seconds += time.perf_counter() - t_start
        self.largest_ok = max(self.largest_ok, n)
        return statistics.median(times) if times else 0.0

    def fits(self, n):
        """Whether one step at n fits in memory (runs one where not yet known)."""
        if n <= self.largest_ok:
            return True
        if self.smallest_oom is not None and n >= self.smallest_oom:
            return False
        return self.run(n, 0) is not None or n <= self.largest_ok

    def cap(self):
        """Where an out-of-memory was seen: the largest n that fits (found by
        bisection between what ran and what did not; 0 when nothing fits).
        Else None: no cap is known."""
        if self.smallest_oom is None:
            return None
        while self.smallest_oom - self.largest_ok > 1:
            self.fits((self.largest_ok + self.smallest_oom) // 2)
        return self.largest_ok


class StepTimer:
    """Each training step's compute time on this rank: from the start of the
    module's forward to the moment its last gradient bucket is ready, less the
    time the rank spent blocked inside the gradient hook (a host rank's
    collective that completes before it returns). On a CUDA rank the two ends
    are CUDA events on the compute stream, read once they have completed, so
    the step is never made to wait."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.current = None
        self.pending = []  # CUDA: (n, start event, end event)
        self.records = []  # (n, seconds), completed steps not yet taken

    def begin(self, n):
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            self.current = [n, start, 0.0]
        else:
            self.current = [n, time.perf_counter(), 0.0]

    def blocked(self, seconds):
        if self.current is not None:
            self.current[2] += seconds

    def end(self):
        if self.current is None:
            return
        n, start, blocked = self.current
        self.current = None
        if self.cuda:
            stop = torch.cuda.Event(enable_timing=True)
            stop.record()
            self.pending.append((n, start, stop))
        else:
            self.records.append((n, max(time.perf_counter() - start - blocked, 0.0)))

    def take(self):
        """The completed steps' (n, seconds) since the last take."""
        still = []
        for n, start, stop in self.pending:
            if stop.query():
                self.records.append((n, start.elapsed_time(stop) / 1e3))
            else:
                still.append((n, start, stop))
        self.pending = still
        out, self.records = self.records, []
        return out


def window_point(records):
    """One (n, seconds) point from a window of steps: the size most steps had,
    and the median of their times (robust to a slow first step)."""
    if not records:
        return None
    sizes = {}
    for n, t in records:
        sizes.setdefault(n, []).append(t)
    n = max(sizes, key=lambda k: (len(sizes[k]), k))
    return n, statistics.median(sizes[n])
