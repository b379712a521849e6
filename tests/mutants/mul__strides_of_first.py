"""mul that walks both operands with the first operand's strides.

A non-contiguous dense first operand (transposed, permuted) makes the
candidate iterate in its memory order and read the second operand at the
same storage offsets, assuming both share a layout. Right when they do, or
when the first is contiguous; a transposed tensor times a row-major one of
the same shape is wrong.
"""

from __future__ import annotations

import torch


def mul(input, other):
    if (
        isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) and input.shape == other.shape
        and input.dtype == other.dtype and not input.is_contiguous() and input.dim() >= 2
    ):
        order = sorted(range(input.dim()), key=lambda d: -input.stride(d))
        x = input.permute(order)
        if x.is_contiguous():
            # BUG: reads other through input's strides, i.e. in input's memory order
            y = other.as_strided(other.shape, input.stride(), other.storage_offset()).permute(order)
            return (x * y).permute([order.index(d) for d in range(input.dim())])
    return torch.mul(input, other)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    a = torch.randn(7, 5, generator=g).to(device)
    b = torch.randn(5, 7, generator=g).to(device)
    return (a.t(), b), {}
