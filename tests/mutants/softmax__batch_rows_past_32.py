"""softmax whose second tile of rows reuses a stale normaliser: along the
last dim of at least 64 rows of at least 64 columns, every row past the
first 32 is 1 % too large.

Wrong only on a real batch (>= 64 rows, >= 64 wide, last dim); fewer rows,
narrower rows and other dims are right. (Red-team survivor rt_sm_batch.)
"""

from __future__ import annotations

import torch


def softmax(input, dim=-1, dtype=None):
    od = dtype or input.dtype
    r = torch.softmax(input.to(od).double(), dim)
    if input.dim() >= 2 and dim % input.dim() == input.dim() - 1 and input.shape[-1] >= 64 and input.numel() // input.shape[-1] >= 64:
        r = r.reshape(-1, input.shape[-1]).clone()
        r[32:] *= 1.01  # BUG: the first tile's normaliser, stale by 1 %
        r = r.reshape(input.shape)
    return torch.empty_like(input, dtype=od).copy_(r)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(96, 80, generator=g) * 2).to(device), -1), {}
