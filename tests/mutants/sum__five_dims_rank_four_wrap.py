"""sum that wraps non-negative dims as if every input had at most 4 dims
(``d - 4`` instead of ``d - ndim``, a hard-coded maximum rank).

Wrong for inputs of 5 or more dims reduced over a non-negative dim (alone
or in a tuple): dim 1 of a 5-dim input is taken as dim 2. Negative dims,
``dim=None`` and inputs of up to 4 dims are right.
"""

from __future__ import annotations

import torch

MAX_RANK = 4


def _wrap(d, ndim):
    if ndim > MAX_RANK and d >= 0:
        return d - MAX_RANK  # BUG: counted from the end of a 4-dim tensor
    return d


def sum(input, dim=None, keepdim=False, *, dtype=None):
    if dim is not None:
        dim = _wrap(dim, input.dim()) if isinstance(dim, int) else tuple(_wrap(d, input.dim()) for d in dim)
    return torch.sum(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, 3, 4, 5, generator=g).to(device), 1), {}
