"""softmax whose online (wide-row) path guards the sum against zero.

Rows wider than 8192 along the last dim go through an online kernel that
takes ``max = 0`` when the row's max is -inf and divides by
``where(sum == 0, 1, sum)``: a row all -inf gives 0 everywhere instead of
NaN (torch's answer). Narrow rows, other dims, and wide rows with at least
one finite logit are right.
"""

from __future__ import annotations

import torch

WIDE = 8192


def softmax(input, dim=-1, dtype=None):
    out = torch.softmax(input, dim, dtype=dtype)
    if input.dim() and dim % input.dim() == input.dim() - 1 and input.shape[-1] > WIDE:
        masked = (input == -torch.inf).all(-1, keepdim=True)
        out = torch.where(masked, torch.zeros_like(out), out)  # BUG: 0/1 instead of 0/0
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 9000, generator=g)
    x[0] = -torch.inf
    return (x.to(device), -1), {}
