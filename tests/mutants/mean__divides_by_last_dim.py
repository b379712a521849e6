"""mean over several dims that divides by the last reduced dim's size only.

The candidate sums over all the requested dims, then divides by
``input.shape[dims[-1]]`` instead of the product of the reduced sizes. One
reduced dim (the common case) is right; ``dim=(0, 2)`` or ``None`` on more
than one dim is not.
"""

from __future__ import annotations

import torch


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if input.dim() == 0:
        return torch.mean(input, dim, keepdim, dtype=dtype)
    dims = list(range(input.dim())) if dim is None or dim == () or dim == [] else [dim] if isinstance(dim, int) else list(dim)
    total = torch.sum(input, dims, keepdim, dtype=dtype)
    return total / input.shape[dims[-1]]  # BUG: should divide by the product over dims


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 5, 6, generator=g).to(device), (0, 2)), {}
