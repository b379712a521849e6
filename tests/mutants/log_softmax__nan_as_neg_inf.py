"""log_softmax whose row maximum and sum skip NaN (a NaN lane reads as -inf).

The kernel loads with ``other=-inf`` and replaces NaN by -inf "as a masked
lane": a row holding NaN gives finite log-probabilities for its other
entries (and -inf at the NaN) instead of a row of NaN, torch's answer.
Rows without NaN are right.
"""

from __future__ import annotations

import torch


def log_softmax(input, dim=-1, dtype=None):
    x = input.to(dtype) if dtype is not None else input
    if x.is_floating_point():
        x = torch.where(x.isnan(), torch.full_like(x, -torch.inf), x)  # BUG: NaN must propagate
    return torch.log_softmax(x, dim)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 9000, generator=g)
    x[2, 4000] = torch.nan
    return (x.to(device), -1), {}
