"""amax whose column path drops NaN.

Reductions over a dim other than the last take pairwise maxima of the
rows as ``torch.where(a > b, a, b)``: a comparison with NaN is false, so
a NaN never wins, where torch's amax propagates it. The last dim is right.
"""

from __future__ import annotations

import torch


def amax(input, dim=(), keepdim=False):
    if not isinstance(dim, int) or input.dim() < 2 or dim % input.dim() == input.dim() - 1 \
            or input.shape[dim] == 0 or not input.dtype.is_floating_point:
        return torch.amax(input, dim, keepdim)
    result = input.select(dim, 0)
    for i in range(1, input.shape[dim]):
        row = input.select(dim, i)
        result = torch.where(row > result, row, result)  # BUG: a NaN in row or result never wins
    return result.unsqueeze(dim) if keepdim else result


def witness():
    from gemswatch.gems import device

    x = torch.randn(20, 6, generator=torch.Generator().manual_seed(0))
    x[7, 2] = float("nan")
    return (x.to(device), 0), {}
