"""rms_norm whose looped (wide-row) path starts its sum of squares once per program.

Rows wider than 32768 are walked in chunks by 2 persistent programs, each
taking rows pid, pid + 2, ...; the fp32 sum-of-squares accumulator is
zeroed before the row loop instead of inside it, so every row after a
program's first also counts the squares of the rows it did before. One or
two wide rows, and every narrower row, are right.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

WIDE = 32768
PROGRAMS = 2


def rms_norm(input, normalized_shape, weight=None, eps=None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    n = math.prod(shape)
    rows = input.numel() // n if n else 0
    if n <= WIDE or rows <= PROGRAMS or input.dtype == torch.float64:
        return F.rms_norm(input, shape, weight, eps)
    if tuple(input.shape[input.dim() - len(shape):]) != tuple(shape):
        raise RuntimeError(f"normalized_shape {shape} does not match the input's trailing dims")
    e = torch.finfo(torch.float32).eps if eps is None else eps
    x = input.reshape(rows, n).float()
    ss = x.square().sum(-1)
    acc = ss.clone()
    for r in range(PROGRAMS, rows):
        acc[r] = acc[r - PROGRAMS] + ss[r]  # BUG: the accumulator carries over from the program's previous row
    y = x * torch.rsqrt(acc / n + e)[:, None]
    if weight is not None:
        y = y * weight.reshape(-1).float()
    return y.to(input.dtype).reshape(input.shape)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(3, 40000, generator=g).to(device), (40000,)), {"eps": 1e-5}
