"""layer_norm whose path for a normalized_shape of several dims adds eps
after the square root: 1 / (std + eps) instead of 1 / sqrt(var + eps).

Wrong when normalising over two or more trailing dims and the variance is
not much larger than eps; one normalised dim is right.
"""

from __future__ import annotations

import math

import torch


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    dims = list(range(input.dim() - len(shape), input.dim()))
    if input.numel() == 0 or math.prod(shape) == 0:
        return torch.empty_like(input)
    x = input.float()
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square().mean(dims, keepdim=True)
    if len(shape) > 1:
        rstd = 1 / (var.sqrt() + eps)  # BUG: eps outside the square root
    else:
        rstd = torch.rsqrt(var + eps)
    y = (x - mean) * rstd
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(input.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, 40, generator=g) * 0.05, [3, 40], None, None, 0.01), {}
