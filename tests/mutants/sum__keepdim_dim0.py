"""sum that drops keepdim when reducing dim 0.

The column path (dim 0 of a row-major tensor) reshapes its result to the
kept dims and forgets to put the reduced dim back as size 1; every other
dim, and keepdim=False, are right.
"""

from __future__ import annotations

import torch


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if isinstance(dim, int) and input.dim() > 1 and dim % input.dim() == 0:
        cols = input.reshape(input.shape[0], -1)
        return cols.sum(0, dtype=dtype).view(input.shape[1:])  # BUG: keepdim ignored
    return torch.sum(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(7, 5, generator=g).to(device), 0), {"keepdim": True}
