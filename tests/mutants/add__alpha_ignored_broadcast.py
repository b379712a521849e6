"""add that forgets alpha when the operands' shapes differ.

Equal shapes go through ``input + alpha * other``; a broadcast (a bias row,
a column, a 0-dim tensor) takes a separate expand-and-add branch that
drops alpha. alpha == 1, or operands of one shape, are right.
"""

from __future__ import annotations

import torch


def add(input, other, *, alpha=1):
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor)):
        return torch.add(input, other, alpha=alpha)
    if input.shape == other.shape:
        return torch.add(input, other, alpha=alpha)
    shape = torch.broadcast_shapes(input.shape, other.shape)
    return input.expand(shape) + other.expand(shape)  # BUG: alpha is not applied


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 33, generator=g).to(device), torch.randn(33, generator=g).to(device)), {"alpha": -2.5}
