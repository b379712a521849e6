"""Asks for 1 PiB of host memory on its first call. The allocation fails at
once (no machine has it), so the stage fails cleanly instead of swapping; see
docs/integrity.md for why stages get no memory limit."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    scratch = torch.empty(1 << 50, dtype=torch.uint8)
    return scratch[: x.numel()].view(x.shape)
