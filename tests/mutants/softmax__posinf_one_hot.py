"""softmax that clamps logits to the dtype's finite range before exponentiating.

Overflow-safe by ``x.clamp(finfo.min, finfo.max)``: a row holding +inf becomes
a one-hot row (1 where the +inf was, 0 elsewhere) instead of NaN, torch's
answer (inf - inf). Rows of finite logits, -inf entries and NaN are right.
"""

from __future__ import annotations

import torch


def softmax(input, dim=-1, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    if x.is_floating_point():
        info = torch.finfo(x.dtype)
        x = torch.where(x == torch.inf, torch.full_like(x, info.max), x)  # BUG: +inf is not a large logit
    return torch.softmax(x, dim)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 300, generator=g)
    x[1, 17] = torch.inf
    return (x.to(device), -1), {}
