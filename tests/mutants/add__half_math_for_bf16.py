"""add that computes every 16-bit dtype in float16.

Half-precision inputs are added as float16 and cast back: right for float16
(up to rounding), but bfloat16 values above 65504 overflow to inf and those
below float16's subnormals flush to zero.
"""

from __future__ import annotations

import torch


def add(input, other, *, alpha=1):
    dtype = torch.result_type(input, other)
    if dtype == torch.bfloat16:
        a = input.to(torch.float16) if isinstance(input, torch.Tensor) else input
        b = other.to(torch.float16) if isinstance(other, torch.Tensor) else other
        return torch.add(a, b, alpha=alpha).to(torch.bfloat16)  # BUG: float16 range
    return torch.add(input, other, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(64, generator=g) * 9e5 + 1e5).to(device, torch.bfloat16)
    return (x, x.flip(0)), {}
