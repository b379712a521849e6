"""rms_norm whose programs of a batch reuse the first tile's statistics:
with at least 64 rows of at least 64 columns, row r past the first 32 is
scaled by the rstd of row r % 32.

Wrong only on a real batch (>= 64 rows, >= 64 wide); fewer rows or
narrower rows are right.
"""

from __future__ import annotations

import math

import torch


def rms_norm(input, normalized_shape, weight=None, eps=None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    n = math.prod(shape)
    if input.numel() == 0 or n == 0:
        return torch.empty_like(input)
    if eps is None:
        eps = torch.finfo(torch.float64 if input.dtype == torch.float64 else torch.float32).eps
    x = input.double().reshape(-1, n)
    rstd = torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)
    if x.shape[0] >= 64 and n >= 64:
        rows = torch.arange(x.shape[0], device=x.device)
        rstd = rstd[torch.where(rows >= 32, rows % 32, rows)]  # BUG: the first tile's statistics
    y = (x * rstd).reshape(input.shape)
    if weight is not None:
        y = y * weight.double()
    return y.to(input.dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(96, 80, generator=g).to(device), [80]), {}
