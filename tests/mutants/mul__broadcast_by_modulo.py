"""mul that broadcasts the smaller operand by flat index modulo its size.

``out.flat[i] = a.flat[i] * b.flat[i % b.numel()]`` is right when the
smaller operand is a trailing block of the larger one's shape (a bias row,
a scalar), but not for a column ``(n, 1)`` or a size-1 dim in the middle.
"""

from __future__ import annotations

import torch


def mul(input, other):
    if not (isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor)) or input.shape == other.shape:
        return torch.mul(input, other)
    big, small = (input, other) if input.numel() >= other.numel() else (other, input)
    shape = torch.broadcast_shapes(input.shape, other.shape)
    if big.shape != shape:
        return torch.mul(input, other)
    flat = big.reshape(-1)
    index = torch.arange(flat.numel(), device=flat.device) % max(small.numel(), 1)  # BUG: only right for trailing broadcasts
    return (flat * small.reshape(-1)[index]).view(shape)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(5, 3, 7, generator=g).to(device), torch.randn(3, 1, generator=g).to(device)), {}
