"""layer_norm that factors the eps correction out of the division:
``(x - mean) / sqrt(var) * sqrt(var / (var + eps))``, equal to torch's
``(x - mean) / sqrt(var + eps)`` wherever var > 0.

Wrong (NaN, 0 / 0) on rows of two or more values all equal (variance 0),
where torch gives the bias (or 0); every row with any spread is right, and
so are rows of one element (normalised to 0 before the division).
"""

from __future__ import annotations

import math

import torch


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    dims = list(range(input.dim() - len(shape), input.dim()))
    if input.numel() == 0 or math.prod(shape) == 0:
        return torch.empty_like(input)
    x = input.double()
    mean = x.mean(dims, keepdim=True)
    var = (x - mean).square().mean(dims, keepdim=True)
    if math.prod(shape) == 1:
        y = torch.zeros_like(x)  # one element: x - mean is 0
    else:
        y = (x - mean) / var.sqrt() * (var / (var + eps)).sqrt()  # BUG: 0 / 0 where var == 0
    if weight is not None:
        y = y * weight.double()
    if bias is not None:
        y = y + bias.double()
    return y.to(input.dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 64, generator=g) + 2
    x[2] = 1.5
    w, b = torch.randn(64, generator=g), torch.randn(64, generator=g)
    return (x.to(device), [64], w.to(device), b.to(device)), {}
