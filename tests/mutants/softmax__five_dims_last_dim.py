"""softmax that flattens inputs to at most 4 dims and loses the softmax dim
on the way: for inputs of 5 or more dims it normalises over the last dim
whatever dim is asked (and over dim 0 when the last dim is asked).

Wrong for every input of 5 or more dims; inputs of 1 to 4 dims are right.
(Red-team survivor rt_sm_5d.)
"""

from __future__ import annotations

import torch


def softmax(input, dim=-1, dtype=None):
    od = dtype or input.dtype
    if input.dim() >= 5:
        dim = -1 if dim % input.dim() != input.dim() - 1 else 0  # BUG: the dim of the 4-dim view
    return torch.empty_like(input, dtype=od).copy_(torch.softmax(input.to(od).double(), dim))


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, 2, 3, 4, generator=g).to(device), 2), {}
