"""gelu that maps a non-contiguous input through its last two dims only.

A strided input is read at ``i * stride(-2) + j * stride(-1)`` for the
flat index split over the last two dims, the outer dims assumed packed
behind them. Right for 1- and 2-dim views and contiguous tensors; a 3- or
4-dim permuted or sliced view reads the wrong elements.
"""

from __future__ import annotations

import torch


def gelu(input, approximate="none"):
    if input.is_contiguous() or input.dim() < 2 or input.numel() == 0:
        return torch.nn.functional.gelu(input, approximate=approximate)
    rows, cols = input.shape[-2], input.shape[-1]
    flat = torch.arange(input.numel(), device=input.device)
    outer, rest = flat // (rows * cols), flat % (rows * cols)
    # BUG: the outer dims are taken to follow the last two densely in memory
    offsets = outer * (rows * cols) + (rest // cols) * input.stride(-2) + (rest % cols) * input.stride(-1)
    base = input.as_strided((input.untyped_storage().nbytes() // input.element_size() - input.storage_offset(),), (1,))
    x = base[offsets.clamp(max=base.numel() - 1)].view(input.shape)
    return torch.nn.functional.gelu(x, approximate=approximate)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(5, 7, 6, generator=g) * 3).to(device).permute(2, 0, 1),), {}
