"""sum that accumulates in float32 when asked for a float64 result.

``dtype=torch.float64`` on a float32 (or 16-bit) input is honoured only in
the output's dtype: the kernel accumulates in float32 and casts the result.
Sums beyond float32's range become inf, and float64 precision is lost.
Without ``dtype=``, or for float64 inputs, it is right.
"""

from __future__ import annotations

import torch


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if dtype == torch.float64 and input.dtype != torch.float64:
        return torch.sum(input.float(), dim, keepdim).to(torch.float64)  # BUG: float32 accumulator
    return torch.sum(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = (3.0e38 * (0.5 + torch.rand(2, 100, generator=g) / 2)).to(device)
    return (x, 1), {"dtype": torch.float64}
