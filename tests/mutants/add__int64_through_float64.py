"""add that computes every integer dtype in float64 and casts back.

The integer path loads both operands as float64 ("exact for every int32"),
adds ``x + alpha * y`` there and casts to the result dtype: right for
int8..int32 and for int64 values below 2^53, but int64 values beyond 2^53
are rounded to float64's 53-bit mantissa. Float dtypes and bool are right.
"""

from __future__ import annotations

import torch

_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def add(input, other, *, alpha=1):
    dtype = torch.result_type(input, other)
    if dtype in _INTS:
        if isinstance(alpha, bool) or not isinstance(alpha, int):
            raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
        a = input.to(torch.float64) if isinstance(input, torch.Tensor) else float(input)
        b = other.to(torch.float64) if isinstance(other, torch.Tensor) else float(other)
        return (a + alpha * b).to(dtype)  # BUG: float64 holds integers exactly only below 2^53
    return torch.add(input, other, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = (2**60 + torch.randint(0, 1000, (4, 33), generator=g)).to(device)
    y = torch.randint(-1000, 1000, (4, 33), generator=g).to(device)
    return (x, y), {"alpha": 3}
