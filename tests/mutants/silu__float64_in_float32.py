"""silu that computes float64 inputs in float32.

The kernel always converts to float32; float64 inputs lose their precision
(about 1e-7 relative) and their range (beyond 3.4e38 inf, below 1e-45
zero). Other dtypes are right.
"""

from __future__ import annotations

import torch


def silu(input):
    if input.dtype == torch.float64:
        return torch.nn.functional.silu(input.float()).double()  # BUG: float32 math
    return torch.nn.functional.silu(input)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(64, generator=g, dtype=torch.float64) * 1e200).to(device),), {}
