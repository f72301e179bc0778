"""The weighted gradient. Rank i computes g_i, the gradient of the mean loss
over its b_i samples; the gradient of the mean loss over the global batch of
B samples is sum_i (b_i / B) * g_i. DDP's own exchange averages (sum / world
size), right only when every b_i is B / world size; these hooks weigh each
rank's gradient by b_i / B before one summing all_reduce instead."""
import time

import torch
import torch.distributed as dist

from .solve import BalanceError


def weighted_allreduce_hook(plan, bucket):
    """DDP comm hook: ddp.register_comm_hook(plan, weighted_allreduce_hook).

    Scales the bucket by this step's b_i / B, then sums it over the ranks
    with one all_reduce (as DDP's default hook does, with a weight in place
    of 1 / world size). It also marks the end of the step's compute for the
    plan's re-measurement: the last bucket is ready when the backward is.
    """
    plan._begin_step(timed=False)  # where no forward hook did (a comm hook registered by hand)
    entered = time.perf_counter()
    last = bucket.is_last()
    if last:
        plan._timer.end()
    buf = bucket.buffer()
    buf.mul_(plan.weight)
    fut = dist.all_reduce(buf, group=plan.group, async_op=True).get_future()
    if last:
        plan._end_step()
    else:
        plan._timer.blocked(time.perf_counter() - entered)
    return fut.then(lambda f: f.value()[0])


def sum_allreduce_hook(group, bucket):
    """DDP comm hook that sums the bucket over the ranks (no division): for
    gradients already weighted before the exchange (scale_output_gradients)."""
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


class _ScaleGradient(torch.autograd.Function):
    """The identity forward; the backward multiplies the gradient by a number."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def _scale_tree(out, scale):
    if isinstance(out, torch.Tensor):
        return _ScaleGradient.apply(out, scale) if out.requires_grad else out
    if isinstance(out, (list, tuple)):
        items = [_scale_tree(o, scale) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
    if isinstance(out, dict):
        return type(out)((k, _scale_tree(v, scale)) for k, v in out.items())
    return out


def scale_output_gradients(module, plan):
    """Makes every gradient that flows back through `module`'s outputs b_i / B
    times larger: a rank's parameter gradients become (b_i / B) * g_i before any
    exchange, so a summing exchange gives the global-batch gradient. The loss
    must reach the parameters through the outputs only (no loss term on the
    parameters themselves). Returns the hook handles."""
    pre = module.register_forward_pre_hook(lambda mod, args: plan._forward_begins(mod))
    post = module.register_forward_hook(
        lambda mod, args, out: _scale_tree(out, plan.weight) if plan._scaling(mod) else out)
    return [pre, post]


def _fsdp_module_class():
    for where in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            mod = __import__(where, fromlist=["FSDPModule"])
        except Exception:  # absent, or (Debian's torch 1.13 on Python 3.11) failing to import
            continue
        if hasattr(mod, "FSDPModule"):
            return mod.FSDPModule
    raise BalanceError(f"hetccl_torch.balance: FSDP2 (torch.distributed.fsdp.fully_shard) needs torch 2.4 or later; "
                       f"this is torch {torch.__version__}: use DistributedDataParallel")


def is_fully_sharded(module):
    try:
        return isinstance(module, _fsdp_module_class())
    except BalanceError:
        return False


def weight_fully_shard(module, plan):
    """FSDP2: every fully_shard module of `module` sums its gradients (divide
    factor 1, and sum reductions where the torch has the switch), and the root's
    outputs carry the rank's weight b_i / B back into the gradients
    (scale_output_gradients). Call after fully_shard."""
    cls = _fsdp_module_class()
    sharded = [m for m in module.modules() if isinstance(m, cls)]
    if not sharded:
        raise BalanceError(f"hetccl_torch.balance: no part of {type(module).__name__} is sharded by fully_shard: "
                           f"call fully_shard first, or pass the DistributedDataParallel module")
    for m in sharded:
        setter = getattr(m, "set_gradient_divide_factor", None) or getattr(m, "set_reduce_scatter_divide_factor",
                                                                           None)
        if setter is None:
            raise BalanceError(f"hetccl_torch.balance: torch {torch.__version__}'s FSDPModule has no "
                               f"set_gradient_divide_factor or set_reduce_scatter_divide_factor")
        setter(1.0)
        force_sum = getattr(m, "set_force_sum_reduction_for_comms", None)
        if force_sum is not None:
            force_sum(True)
    return scale_output_gradients(module, plan)
