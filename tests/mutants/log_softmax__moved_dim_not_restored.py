"""log_softmax that moves the reduced dim last, computes, and reshapes the
result back to the input's shape instead of moving the dim back.

Wrong for any dim but the last of a tensor whose other dims differ in size
(dim 0, a middle dim); dim -1 is right.
"""

from __future__ import annotations

import torch


def log_softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    x = input.to(dtype) if dtype is not None else input
    if x.dim() == 0:
        return torch.zeros_like(x)
    moved = x.float().movedim(dim, -1).contiguous()
    shifted = moved - moved.amax(-1, keepdim=True)
    out = shifted - shifted.exp().sum(-1, keepdim=True).log()
    return out.reshape(x.shape).to(x.dtype)  # BUG: reshaped, not moved back


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 3, 40, generator=g), 0), {}
