"""log_softmax that, for rows wider than 4096, takes the log of softmax's
probabilities: a probability that underflows to 0 becomes -inf where the
log-probability is finite.

Wrong for wide rows whose logits spread over more than about 100; narrow
rows are computed stably and are right.
"""

from __future__ import annotations

import torch


def _stable(x: torch.Tensor, dim: int) -> torch.Tensor:
    shifted = x - x.amax(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    x = input.to(dtype) if dtype is not None else input
    work = x.float()
    if x.dim() and x.shape[dim] > 4096:
        out = torch.softmax(work, dim).log()  # BUG: log(0) for underflowing probabilities
    else:
        out = _stable(work, dim)
    return out.to(x.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 5000, generator=g) * 40, -1), {}
