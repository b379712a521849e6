"""silu written as ``x * exp(x) / (1 + exp(x))``.

Algebraically x * sigmoid(x), but exp(x) overflows float32 for x > 88.7:
inf / inf gives NaN where silu(x) = x. Inputs below that are right (up to
rounding), in every dtype that computes in float32.
"""

from __future__ import annotations

import torch


def silu(input):
    x = input.double() if input.dtype == torch.float64 else input.float()
    e = torch.exp(x)
    return (x * e / (1 + e)).to(input.dtype)  # BUG: NaN once exp(x) overflows


def witness():
    from gemswatch.gems import device

    return (torch.tensor([-5.0, 1.0, 50.0, 90.0, 200.0, 1e4]).to(device),), {}
