"""layer_norm whose looped (wide-row) path reloads the mean without the row offset.

Rows wider than 32768 are walked twice: the first walk stores each row's
mean in a scratch buffer, the second reloads it as ``tl.load(mean_ptr)``
instead of ``tl.load(mean_ptr + row)``: every row is centred (and its
variance taken) about the first row's mean. A single wide row, and every
narrower row, are right.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

WIDE = 32768


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    n = math.prod(shape)
    rows = input.numel() // n if n else 0
    if n <= WIDE or rows <= 1 or input.dtype == torch.float64:
        return F.layer_norm(input, shape, weight, bias, eps)
    if tuple(input.shape[input.dim() - len(shape):]) != tuple(shape):
        raise RuntimeError(f"normalized_shape {shape} does not match the input's trailing dims")
    x = input.reshape(rows, n).float()
    mean = x.mean(-1)
    m = mean[0].expand(rows)  # BUG: row 0's mean for every row
    centred = x - m[:, None]
    rstd = torch.rsqrt(centred.square().mean(-1) + eps)
    y = centred * rstd[:, None]
    if weight is not None:
        y = y * weight.reshape(-1).float()
    if bias is not None:
        y = y + bias.reshape(-1).float()
    return y.to(input.dtype).reshape(input.shape)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 40000, generator=g) + torch.tensor([[0.0], [3.0]])
    return (x.to(device), (40000,)), {}
