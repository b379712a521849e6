"""amax over several dims that keeps only the last reduced dim with keepdim.

The candidate reduces the dims one at a time from the highest down, with
keepdim only on the first reduction it does: for one dim it is right, for
``dim=(0, 2)`` with keepdim the result loses dim 0.
"""

from __future__ import annotations

import torch


def amax(input, dim=(), keepdim=False):
    if isinstance(dim, int) or input.dim() == 0:
        return torch.amax(input, dim, keepdim)
    dims = sorted((d % input.dim() for d in dim), reverse=True) or list(range(input.dim() - 1, -1, -1))
    result = input
    for i, d in enumerate(dims):
        result = torch.amax(result, d, keepdim=keepdim and i == 0)  # BUG: keepdim for the first only
    return result


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 4, 5, generator=g).to(device), (0, 2)), {"keepdim": True}
