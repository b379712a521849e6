"""layer_norm whose affine step is written for weight and bias together:
with a weight but no bias, the weight is skipped.

Wrong for layer_norm(x, shape, weight) with bias None; no parameters, both,
or a bias alone are right.
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
    if bias is not None:
        y = y * (weight.float() if weight is not None else 1) + bias.float()
    # BUG: a weight without a bias is never applied
    return y.to(input.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 123, generator=g), [123], torch.randn(123, generator=g)), {}
