"""Balanced batches for ranks of different speeds (docs/heterogeneous-training.md).

    from hetccl_torch import balance

    plan = balance.plan(ddp, step_fn, global_batch=256)   # measure, plan, weigh DDP's gradients
    for idx in plan.sampler(len(dataset)):                 # this rank's share of each global batch
        ...                                                # the usual forward, backward, optimizer step

step_fn(n) runs the forward and backward of n samples. Each rank gets a
share of the global batch in proportion to its speed (the slowest rank
finishes as early as it can), and DDP's gradient exchange weighs rank i's
gradient by b_i / B, so a step makes the update of one process on the whole
global batch. Works with any torch.distributed backend: hetccl, nccl (on
hetccl's drop-in or not), gloo.
"""
from .hooks import scale_output_gradients, sum_allreduce_hook, weight_fully_shard, weighted_allreduce_hook
from .planner import Plan, plan
from .solve import BalanceError

__all__ = ["plan", "Plan", "BalanceError", "weighted_allreduce_hook", "weight_fully_shard",
           "scale_output_gradients", "sum_allreduce_hook"]
