"""mul that computes every float dtype in float32.

The kernel loads, multiplies and stores through float32 whatever the
dtype; float64 operands lose their precision (about 1e-7 relative) and
their range (products beyond 3.4e38 become inf, below 1e-45 zero). Other
dtypes are right.
"""

from __future__ import annotations

import torch


def mul(input, other):
    dtype = torch.result_type(input, other)
    if dtype == torch.float64:
        a = input.to(torch.float32) if isinstance(input, torch.Tensor) else input
        b = other.to(torch.float32) if isinstance(other, torch.Tensor) else other
        return torch.mul(a, b).to(torch.float64)  # BUG: float32 math for float64
    return torch.mul(input, other)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, generator=g, dtype=torch.float64) * 1e30
    return (x.to(device), x.flip(0).to(device)), {}
