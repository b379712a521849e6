"""silu that takes any input with a unit last stride as contiguous.

The candidate checks only ``stride(-1) == 1`` before reading the input as
one flat run of elements. Right for contiguous tensors; padded rows such as
``x[:, :k]`` (unit stride, rows further apart than k) are read across the
gaps, so every row after the first is shifted.
"""

from __future__ import annotations

import torch


def silu(input):
    if input.dim() >= 2 and input.stride(-1) == 1 and input.stride(-2) > 0 and input.numel():
        # BUG: a unit last stride does not make the rows adjacent
        flat = input.as_strided((input.numel(),), (1,))
        return torch.nn.functional.silu(flat).view(input.shape)
    return torch.nn.functional.silu(input)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(6, 40, generator=g) * 3).to(device)[:, :33],), {}
