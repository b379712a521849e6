"""log_softmax that skips the max shift for rows of up to 1024 ("they are
short, exp cannot overflow"): logits above about 88 overflow exp in float32
and the row becomes inf - inf = NaN or -inf.

Wrong for narrow rows with large logits; wide rows and ordinary logits are
right.
"""

from __future__ import annotations

import torch


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    x = input.to(dtype) if dtype is not None else input
    work = x.float()
    if x.dim() == 0 or x.shape[dim] <= 1024:
        out = work - work.exp().sum(dim, keepdim=True).log()  # BUG: no max subtraction
    else:
        shifted = work - work.amax(dim, keepdim=True)
        out = shifted - shifted.exp().sum(dim, keepdim=True).log()
    return out.to(x.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 300, generator=g) * 100, -1), {}
