"""mean that takes ``dim=()`` (or ``[]``) as "reduce nothing" for the divisor.

torch reads an empty dim list as all dims. The candidate sums over all dims
for it, as torch does, but computes the divisor as the product of the
listed dims' sizes, 1 for an empty list: the result is the sum. ``None``
and non-empty lists are right.
"""

from __future__ import annotations

import math

import torch


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        return torch.mean(input, dim, keepdim, dtype=dtype)
    dims = [dim] if isinstance(dim, int) else list(dim)
    total = torch.sum(input, dims if dims else None, keepdim, dtype=dtype) if dims or keepdim else torch.sum(input, dtype=dtype)
    n = math.prod(input.shape[d] for d in dims) if input.dim() else 1  # BUG: 1 for an empty list
    return total / n


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 6, generator=g).to(device), ()), {}
