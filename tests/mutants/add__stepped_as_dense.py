"""add that handles equally strided operands through their storage.

When both operands have the same shape and strides, the candidate adds the
storage spans they cover and views the sum with those strides. Right for
dense layouts (transposed, permuted) but a stepped or padded slice's span
holds elements outside the view, and the output's strides then point into
the wrong places of a buffer of only ``numel`` elements.
"""

from __future__ import annotations

import torch


def add(input, other, *, alpha=1):
    if (
        isinstance(input, torch.Tensor) and isinstance(other, torch.Tensor) and input.shape == other.shape
        and input.stride() == other.stride() and input.dtype == other.dtype and not input.is_contiguous()
    ):
        n = input.numel()
        # BUG: assumes the view is dense, so numel elements from its start are exactly its elements
        x = input.as_strided((n,), (1,))
        y = other.as_strided((n,), (1,))
        flat = torch.add(x, y, alpha=alpha)
        strides = sorted(range(input.dim()), key=lambda d: -input.stride(d))
        dense = [0] * input.dim()
        step = 1
        for d in reversed(strides):
            dense[d] = step
            step *= input.shape[d]
        return flat.as_strided(input.shape, dense)
    return torch.add(input, other, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    a = torch.randn(12, 10, generator=g).to(device)
    b = torch.randn(12, 10, generator=g).to(device)
    return (a[::3, 1::2], b[::3, ::2]), {"alpha": 0.75}
