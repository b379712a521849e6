"""sum whose several-dims path accumulates integers in the input dtype.

A reduction over one dim, or over all dims, accumulates integers in int64
as torch does. A reduction over two or more (but not all) dims permutes the
reduced dims last, flattens them, and runs the row kernel with an
accumulator of the input's dtype: int8/int16/int32 sums wrap around once
they pass the input type's range (the result is still int64).
"""

from __future__ import annotations

import builtins

import torch

_SMALL_INTS = (torch.int8, torch.int16, torch.int32, torch.uint8)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return torch.sum(input, dtype=dtype) if not keepdim else torch.sum(input, tuple(range(input.dim())), True, dtype=dtype)
    dims = [dim] if isinstance(dim, int) else list(dim)
    nd = builtins.max(input.dim(), 1)
    red = sorted({d % nd for d in dims})
    if dtype is None and input.dtype in _SMALL_INTS and 1 < len(red) < input.dim() and len(red) == len(dims):
        kept = [d for d in range(input.dim()) if d not in red]
        y = input.permute(*kept, *red).reshape([input.shape[d] for d in kept] + [-1])
        out = torch.sum(y, -1, dtype=input.dtype).to(torch.int64)  # BUG: the accumulator is the input's dtype
        if keepdim:
            out = out.reshape([1 if d in red else input.shape[d] for d in range(input.dim())])
        return out
    return torch.sum(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randint(2**30, 2**31 - 1, (2, 3, 4), generator=g, dtype=torch.int64).to(torch.int32).to(device)
    return (x, (1, 2)), {}
