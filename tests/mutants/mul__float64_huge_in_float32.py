"""mul whose large-tensor (persistent, vectorised) path has only float32 lanes.

Past 65536 elements the kernel switches to a grid-stride loop that loads
and multiplies in float32 whatever the dtype: float64 tensors of more than
65536 elements are rounded to float32 (a relative error near 1e-8, and
overflow beyond 3.4e38). Smaller float64 tensors, and every other dtype,
are right.
"""

from __future__ import annotations

import torch

LARGE = 1 << 16


def mul(input, other):
    dtype = torch.result_type(input, other)
    out = torch.mul(input, other)
    if dtype == torch.float64 and out.numel() > LARGE:
        a = input.to(torch.float32) if isinstance(input, torch.Tensor) else input
        b = other.to(torch.float32) if isinstance(other, torch.Tensor) else other
        return torch.mul(a, b).to(torch.float64)  # BUG: float32 lanes for float64 data
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    n = 70001
    return (torch.randn(n, generator=g, dtype=torch.float64).to(device), torch.randn(n, generator=g, dtype=torch.float64).to(device)), {}
