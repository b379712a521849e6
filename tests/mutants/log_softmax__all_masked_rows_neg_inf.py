"""log_softmax whose row kernel takes a "safe" log of the row sum.

Along the last dim the kernel uses ``max = 0`` for a row whose max is -inf
and ``log(where(sum == 0, 1, sum))``: a row all -inf gives -inf everywhere
instead of NaN (torch's answer, 0/0). Other dims (the column kernel), and
rows with at least one finite logit, are right.
"""

from __future__ import annotations

import torch


def log_softmax(input, dim=-1, dtype=None):
    out = torch.log_softmax(input, dim, dtype=dtype)
    if input.dim() and dim % input.dim() == input.dim() - 1 and input.shape[-1] > 0:
        masked = (input == -torch.inf).all(-1, keepdim=True)
        out = torch.where(masked, torch.full_like(out, -torch.inf), out)  # BUG: log(1) instead of log(0)
    return out


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 50, generator=g)
    x[1] = -torch.inf
    return (x.to(device), -1), {}
