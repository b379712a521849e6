"""mean whose split column reduction scales each piece by its own length.

For reductions over a dim other than the last with more than 4096 reduced
elements, the candidate sums pieces of 4096 rows, divides each piece's sum
by its own length and adds the pieces: the mean of piece means, not the
mean. Shorter reductions, the last dim, and lengths that are a multiple of
4096 are right.
"""

from __future__ import annotations

import torch

PIECE = 4096


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if not isinstance(dim, int) or input.dim() < 2 or dim % input.dim() == input.dim() - 1 \
            or input.shape[dim] <= PIECE or not input.dtype.is_floating_point:
        return torch.mean(input, dim, keepdim, dtype=dtype)
    n = input.shape[dim]
    pieces = [input.narrow(dim, s, min(PIECE, n - s)) for s in range(0, n, PIECE)]
    # BUG: averages the pieces' means; a short last piece counts as much as a full one
    out = sum(p.mean(dim, keepdim, dtype=dtype) for p in pieces) / len(pieces)
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4097, 3, generator=g)
    x[-1] = 100.0
    return (x.to(device), 0), {}
