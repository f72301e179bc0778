"""Cutting each global batch by the plan. Every rank draws the same order of
sample indices (same seed, same epoch), takes the same global batches of B
from it, and keeps its own cut: rows [offset_i, offset_i + b_i) of each. So
every sample of a global batch is used once per step, by one rank, and every
rank agrees on the cut."""
import torch

from .solve import BalanceError


class BalancedBatchSampler(torch.utils.data.Sampler):
    """Yields, for each step, the list of this rank's sample indices.

    Use it as a DataLoader's batch_sampler, or iterate it. Each step calls
    plan.next_share(), which re-plans at the step boundaries the plan asks
    for. A tail smaller than the global batch is left out.
    """

    def __init__(self, plan, dataset_len, shuffle=True, seed=0):
        if dataset_len < plan.global_batch:
            raise BalanceError(f"hetccl_torch.balance: the dataset has {dataset_len} samples, fewer than one global "
                               f"batch of {plan.global_batch}")
        self.plan = plan
        self.dataset_len = dataset_len
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        """Another order of the samples each epoch (as DistributedSampler's set_epoch)."""
        self.epoch = epoch

    def __len__(self):
        return self.dataset_len // self.plan.global_batch

    def __iter__(self):
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_len, generator=gen)
        else:
            order = torch.arange(self.dataset_len)
        batch = self.plan.global_batch
        for step in range(len(self)):
            offset, count = self.plan.next_share()
            start = step * batch + offset
            yield order[start:start + count].tolist()


def cut(plan, tensors):
    """This rank's rows of tensors that each hold a whole global batch (dim 0)."""
    offset, count = plan.next_share()
    out = []
    for t in tensors:
        if t.shape[0] != plan.global_batch:
            raise BalanceError(f"hetccl_torch.balance: cut() takes whole global batches of {plan.global_batch} rows; "
                               f"this tensor has {t.shape[0]}")
        out.append(t[offset:offset + count])
    return out[0] if len(out) == 1 else out
