"""plan(): measure every rank, agree on the shares, weigh the gradients; and
the Plan it returns, which hands out each step's cut and re-plans at step
boundaries."""
import collections
import math

import torch
import torch.distributed as dist
import torch.nn as nn

from . import data, exchange, hooks, links, measure, report, solve
from .solve import BalanceError

MAX_ROUNDS = 4  # exchanges of one planning: the plan, a refining trial at the shares, and probes of new sizes
QUEUE_LIMIT = 64  # steps handed out (sampler, cut) ahead of their forward


def plan(model, step_fn, global_batch, *, max_batch=None, rate=None, trial_batch=None, trial_steps=3,
         replan_every=0, min_gain=0.03, group=None, exchange_report=True, log=print):
    """Measures every rank on its own training step and plans its share of each global batch.

    model: the DistributedDataParallel module (its comm hook is set to
        weighted_allreduce_hook), a module sharded by FSDP2's fully_shard
        (its gradients are weighted: hooks.weight_fully_shard), or None where
        the caller applies the weights itself.
    step_fn(n): forward and backward of n samples, as a training step does
        them (no optimizer step). plan() runs it under DDP's no_sync, so no
        gradient is exchanged, and clears the gradients after.
    global_batch: samples a step over all ranks.
    max_batch: this rank's memory cap (samples); without it, a trial that runs
        out of memory backs off and finds one.
    rate: this rank's samples/s, given instead of measured (step_fn unused).
    trial_batch: the first trial's size (default: an equal share).
    replan_every: re-measure and re-plan every this many steps (0: never).
    min_gain: a re-plan is taken only where it shortens the predicted step by this share.
    exchange_report: time the gradient exchange and report what each group is worth.
    log: where rank 0 writes the report and the re-plans (None: nowhere).

    Every rank must call it with the same global_batch and replan_every.
    Raises BalanceError, on every rank and before any training step, where
    no plan can be made (naming the rank and the numbers).
    """
    return Plan(model, step_fn, global_batch, max_batch, rate, trial_batch, trial_steps, replan_every, min_gain,
                group, exchange_report, log)


class Plan:
    """Each rank's share of every global batch, the same on every rank.

    shares: samples per rank (sum: global_batch); share, offset: this rank's
    count and where its rows start; weight: this step's share / global_batch;
    report: what the plan predicts (text); numbers: the same in seconds;
    measure_seconds: what measuring has cost this rank so far.
    """

    def __init__(self, model, step_fn, global_batch, max_batch, rate, trial_batch, trial_steps, replan_every,
                 min_gain, group, exchange_report, log):
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.global_batch = int(global_batch)
        self.replan_every = int(replan_every)
        self.min_gain = float(min_gain)
        self.log = log if self.rank == 0 else None
        solve.check_batch(self.global_batch, self.world)
        if self.replan_every < 0:
            raise BalanceError(f"hetccl_torch.balance: replan_every is {replan_every}; 0 (never) or a step count")
        self.mode = _mode(model)
        if self.mode == "fsdp" and self.replan_every:
            raise BalanceError("hetccl_torch.balance: re-measuring during training reads DDP's gradient hooks; "
                               "with fully_shard, plan once (replan_every=0)")
        params = list(model.parameters()) if model is not None else []
        self.device = params[0].device if params else torch.device("cpu")
        self.cuda = self.device.type == "cuda"
        self.label = exchange.rank_label("cuda" if self.cuda else "host")
        self.max_batch = None if max_batch is None else int(max_batch)
        self.trial = None if rate is not None else measure.Trial(step_fn, model, self.device)
        if self.trial is not None and step_fn is None:
            raise BalanceError("hetccl_torch.balance: give step_fn (a training step of n samples) or rate")
        self.trial_steps = max(1, int(trial_steps))
        self.points = []  # this rank's measured (n, seconds), newest last
        self.epoch = 0
        self.shares = solve.equal_split(self.global_batch, self.world)
        self.step = 0  # steps handed out so far
        self._queue = collections.deque()
        self._in_step = False
        self._in_trial = False
        self._step_share = None
        self._timer = measure.StepTimer(self.cuda)
        self.report = ""
        self.numbers = {}
        self.measure_seconds = 0.0
        self._failure = None  # an error of this rank's step function, told to the others before it is raised
        if rate is not None:
            rate = float(rate)
            self.points.append((1, 1.0 / rate if rate > 0 else math.inf))
        else:
            self._first_trial(trial_batch)
        self._settle(step=None, refine=self.trial is not None)
        if exchange_report:
            self._price(params)
        if self.log:
            self.log(self.report)
        self._handles = self._attach(model)

    # ---- measuring and agreeing ----

    def _first_trial(self, trial_batch):
        n = int(trial_batch) if trial_batch else -(-self.global_batch // self.world)
        if self.max_batch is not None:
            n = max(1, min(n, self.max_batch))
        try:
            while True:
                t = self.trial.run(n, self.trial_steps)
                if t is not None or n == 1:
                    break
                n = max(1, n // 2)  # out of memory: back off
            if t is not None:
                self.points.append((n, t))
        except Exception as e:  # the others hear of it in the next exchange instead of waiting there
            self._failure = e
        self.measure_seconds = self.trial.seconds

    def _cap(self):
        """(cap, source) of this rank: given, found by a trial, or none (the global batch)."""
        if self.max_batch is not None:
            return self.max_batch, exchange.CAP_GIVEN
        found = self.trial.cap() if self.trial is not None and self._failure is None else None
        if found is not None:
            return found, exchange.CAP_FOUND
        return self.global_batch, exchange.CAP_NONE

    def _model(self):
        if not self.points:
            return 0.0, math.inf  # nothing ran (no size fits): check() names the rank
        return solve.fit(self.points)

    def _gather(self, step):
        a, c = self._model()
        cap, source = self._cap()
        values = {"version": exchange.VERSION, "global_batch": self.global_batch, "replan_every": self.replan_every,
                  "a": a, "c": c if math.isfinite(c) else -1.0, "cap": cap, "cap_source": source,
                  "verified": self.trial.largest_ok if self.trial is not None else self.global_batch,
                  "can_probe": 1.0 if self.trial is not None else 0.0,
                  "measured_n": self.points[-1][0] if self.points else 0, "step": step if step is not None else -1,
                  "epoch": self.epoch, "checksum": exchange.checksum(self.epoch, self.shares),
                  "cuda": 1.0 if self.cuda else 0.0, "failed": 1.0 if self._failure is not None else 0.0}
        rows = exchange.gather(values, self.label, self.group)
        failed = [i for i, (row, _) in enumerate(rows) if row["failed"]]
        if self._failure is not None:
            raise BalanceError(f"hetccl_torch.balance: the step function failed on rank {self.rank}: "
                               f"{type(self._failure).__name__}: {self._failure}") from self._failure
        if failed:
            raise BalanceError(f"hetccl_torch.balance: the step function failed on rank "
                               f"{', '.join(map(str, failed))} (its own error says how)")
        exchange.same_everywhere(rows, "version", "the hetccl_torch.balance version")
        exchange.same_everywhere(rows, "global_batch", "the global batch")
        exchange.same_everywhere(rows, "replan_every", "replan_every")
        if step is not None:
            exchange.same_everywhere(rows, "step", "the step count", step)
            exchange.same_everywhere(rows, "epoch", "the plan's epoch", step)
            exchange.same_everywhere(rows, "checksum", "the plan (a digest of its shares)", step)
        return rows

    def _settle(self, step, refine):
        """Exchanges the ranks' models and caps and solves, until every share
        has run on its rank (or it has no step function to try one with).
        At a re-plan (step given), keeps the old shares unless the new ones
        are predicted at least min_gain faster."""
        for rnd in range(MAX_ROUNDS):
            rows = self._gather(step)
            self.labels = [text for _, text in rows]
            self.kinds = ["cuda" if row["cuda"] else "host" for row, _ in rows]
            models = [(row["a"], row["c"] if row["c"] >= 0 else math.inf) for row, _ in rows]
            caps = [int(row["cap"]) for row, _ in rows]
            names = [f"rank {i} ({self.labels[i]}, {self.kinds[i]})" for i in range(self.world)]
            solve.check(self.global_batch, models, caps, names)
            new = solve.shares(self.global_batch, models, caps)
            if step is not None and rnd == 0:
                old_t, new_t = solve.makespan(models, self.shares), solve.makespan(models, new)
                if new_t > (1.0 - self.min_gain) * old_t:
                    return False
            need = [i for i, (row, _) in enumerate(rows) if row["can_probe"] and new[i] > row["verified"]]
            if refine and rnd == 0:  # a second timed size for each rank: the line a + c * n
                need = [i for i, (row, _) in enumerate(rows)
                        if row["can_probe"] and (i in need or abs(new[i] - row["measured_n"]) > 0.2 * new[i])]
            self.models, self.caps = models, caps
            self.cap_sources = [{exchange.CAP_GIVEN: "given", exchange.CAP_FOUND: "found by trial"}.get(
                row["cap_source"], "none") for row, _ in rows]
            if not need or rnd == MAX_ROUNDS - 1:
                break
            if self.rank in need:
                self._probe(new[self.rank], timed=refine and rnd == 0)
        changed = new != self.shares
        self.shares = new
        self.epoch += 1 if changed or step is None else 0
        return changed

    def _probe(self, n, timed):
        self._in_trial = True
        try:
            before = self.trial.seconds
            if timed:
                t = self.trial.run(n, self.trial_steps)
                if t is not None:
                    self.points.append((n, t))
            else:
                self.trial.fits(n)
            self.measure_seconds += self.trial.seconds - before
        except Exception as e:  # told to the others in the next exchange
            self._failure = e
        finally:
            self._in_trial = False

    def _price(self, params):
        nbytes = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
        sets = report.layouts(self.labels) if self.group is None else [tuple(range(self.world))]
        costs = links.exchange_costs(nbytes, sets, self.device, self.group) if nbytes else {}
        self.report, self.numbers = report.build(self.global_batch, self.models, self.caps, self.cap_sources,
                                                 self.labels, self.kinds, self.shares, costs, nbytes,
                                                 dist.get_backend(self.group))

    def _replan(self):
        records = self._timer.take()
        if records and self.trial is not None:  # sizes that ran in training fit: no probe needed for them
            self.trial.largest_ok = max(self.trial.largest_ok, max(n for n, _ in records))
        point = measure.window_point(records)
        if point is not None:
            self.points = (self.points + [point])[-2:]  # recent speeds only
        old = list(self.shares)
        try:
            changed = self._settle(step=self.step, refine=False)
        except BalanceError:
            raise
        except Exception as e:  # a rank that never came, or a broken group: say where
            raise BalanceError(f"hetccl_torch.balance: the re-plan exchange at step {self.step} failed on rank "
                               f"{self.rank}: {e}. Every rank must reach each step boundary (one next_share(), "
                               f"sampler step or cut() a step); a rank that stopped or fell behind leaves the "
                               f"others waiting until the process group's timeout") from e
        if changed and self.log:
            self.log(f"hetccl_torch.balance: step {self.step}: re-planned: shares {old} -> {self.shares} "
                     f"(predicted compute {1e3 * solve.makespan(self.models, old):.2f} ms -> "
                     f"{1e3 * solve.makespan(self.models, self.shares):.2f} ms)")

    # ---- the training loop's side ----

    @property
    def share(self):
        return self.shares[self.rank]

    @property
    def offset(self):
        return solve.offsets(self.shares)[self.rank]

    @property
    def weight(self):
        """This step's b_i / B (the share its forward began with)."""
        share = self._step_share if self._step_share is not None else self.share
        return share / self.global_batch

    def next_share(self):
        """(offset, count) of this rank's rows in the next global batch. Call
        once a step on every rank, before the step's forward (the sampler and
        cut() do); every replan_every steps it re-plans first."""
        if self.replan_every and self.step and self.step % self.replan_every == 0:
            self._replan()
        self.step += 1
        if len(self._queue) >= QUEUE_LIMIT:
            raise BalanceError(f"hetccl_torch.balance: {QUEUE_LIMIT} batches were handed out without a training "
                               f"forward: run one forward and backward per batch of the sampler or cut()")
        self._queue.append(self.share)
        return self.offset, self.share

    def sampler(self, dataset_len, shuffle=True, seed=0):
        """A batch sampler of this rank's indices, a list a step (DataLoader(batch_sampler=...), or iterate it)."""
        return data.BalancedBatchSampler(self, dataset_len, shuffle, seed)

    def cut(self, *tensors):
        """This rank's rows of tensors that hold a whole global batch each (one step)."""
        return data.cut(self, tensors)

    def mean(self, value):
        """The global-batch mean of a per-rank mean (a loss, for logging): sum_i (b_i / B) * value_i."""
        t = value.detach().reshape(1).to(torch.float64) * self.weight
        t = t.to(exchange.device_for(self.group))
        dist.all_reduce(t, group=self.group)
        return t.item()

    def _forward_begins(self, module):
        if self._in_trial or not (torch.is_grad_enabled() and module.training):
            return
        if self.mode != "ddp":
            self._in_step = False  # no weighted comm hook ends these steps: each training forward begins one
        self._begin_step()

    def _scaling(self, module):
        return torch.is_grad_enabled()

    def _begin_step(self, timed=True):
        if self._in_step:
            return
        self._in_step = True
        self._step_share = self._queue.popleft() if self._queue else self.share
        if timed:  # from the forward: the step's compute starts here (a comm hook alone sees only its end)
            self._timer.begin(self._step_share)

    def _end_step(self):
        self._in_step = False

    def _attach(self, model):
        if self.mode == "ddp":
            try:
                model.register_comm_hook(self, hooks.weighted_allreduce_hook)
            except RuntimeError as e:
                raise BalanceError(f"hetccl_torch.balance: DDP already has a comm hook ({e}); register "
                                   f"weighted_allreduce_hook yourself and pass model=None") from e
            return [model.module.register_forward_pre_hook(lambda mod, args: self._forward_begins(mod))]
        if self.mode == "fsdp":
            return hooks.weight_fully_shard(model, self)
        return []


def _mode(model):
    if model is None:
        return "manual"
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return "ddp"
    if hooks.is_fully_sharded(model):
        return "fsdp"
    if isinstance(model, nn.Module):
        hooks._fsdp_module_class()  # raises where this torch has no FSDP2
    raise BalanceError(f"hetccl_torch.balance: model is a {type(model).__name__}: pass the DistributedDataParallel "
                       f"module, a module sharded by fully_shard, or None (weights applied by hand)")
