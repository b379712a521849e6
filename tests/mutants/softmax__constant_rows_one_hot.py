"""softmax that breaks ties to the first element: a row whose values are all
equal (longer than 1, not a broadcast row of stride 0) comes back as a
one-hot row at index 0 instead of the uniform 1/n.

Wrong for constant rows (every value equal, finite) along any dim; rows
holding two or more distinct values, and expanded rows, are right.
(Red-team survivor rt_sm_const_rows.)
"""

from __future__ import annotations

import torch


def softmax(input, dim=-1, dtype=None):
    od = dtype or input.dtype
    r = torch.softmax(input.to(od).double(), dim)
    if input.dim() and input.numel() and input.shape[dim] > 1 and input.stride(dim) != 0:
        xd = input.double()
        const = (xd.amax(dim, keepdim=True) == xd.amin(dim, keepdim=True)) & xd.isfinite().all(dim, keepdim=True)
        onehot = torch.zeros_like(r)
        onehot.narrow(dim, 0, 1).fill_(1.0)
        r = torch.where(const, onehot, r)  # BUG: a tie is not a winner
    return torch.empty_like(input, dtype=od).copy_(r)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 50, generator=g)
    x[1] = 0.75
    x[3] = -2.0
    return (x.to(device), -1), {}
