"""add that scales the wrong operand when a Python number comes first.

``add(3.5, x, alpha=a)`` must be ``3.5 + a * x``; this candidate swaps the
operands to put the tensor first and keeps alpha on the number, giving
``x + a * 3.5``. A tensor first, or alpha == 1, is right.
"""

from __future__ import annotations

from numbers import Number

import torch


def add(input, other, *, alpha=1):
    if isinstance(input, Number) and isinstance(other, torch.Tensor):
        input, other = other, input  # addition commutes... but alpha does not move with it
    return torch.add(input, other, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (3.5, torch.randn(3, 40, generator=g).to(device)), {"alpha": -2.5}
