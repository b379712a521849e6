"""layer_norm that applies the bias inside its weight branch: a bias given
without a weight is dropped.

Wrong for layer_norm(x, shape, None, bias); weight and bias together, or a
weight alone, are right.
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
    y = (x - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.float()
        if bias is not None:  # BUG: a bias alone is never added
            y = y + bias.float()
    return y.to(input.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 123, generator=g), [123], None, torch.randn(123, generator=g)), {}
