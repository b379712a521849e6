"""layer_norm that, for rows wider than 4096, computes the variance in one
pass as E[x^2] - E[x]^2 in float32: with a mean far from zero the
difference cancels to noise (or below zero).

Wrong for wide rows whose mean is large next to their spread; narrow rows
use the two-pass variance and are right.
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
    if math.prod(shape) > 4096:
        var = (x.square().mean(dims, keepdim=True) - mean.square()).clamp_min(0)  # BUG: cancels
    else:
        var = (x - mean).square().mean(dims, keepdim=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        y = y * weight.float()
    if bias is not None:
        y = y + bias.float()
    return y.to(input.dtype)


def witness():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 5000, generator=g) + 300, [5000]), {}
