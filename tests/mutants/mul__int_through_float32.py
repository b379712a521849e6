"""mul whose kernel loads every operand as float32, integers included.

Products are formed in float32 and cast to the result dtype: right for
floats (float64 excepted, not reached here: float64 goes to torch) and for
integer products below 2^24, but int32 products beyond 2^24 lose their low
bits to float32's 24-bit mantissa.
"""

from __future__ import annotations

import torch


def mul(input, other):
    dtype = torch.result_type(input, other)
    if dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        a = input.to(torch.float32) if isinstance(input, torch.Tensor) else float(input)
        b = other.to(torch.float32) if isinstance(other, torch.Tensor) else float(other)
        return (a * b).to(dtype)  # BUG: float32 holds integers exactly only below 2^24
    return torch.mul(input, other)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    x = torch.randint(30000, 46000, (5, 33), generator=g, dtype=torch.int32).to(device)
    y = torch.randint(30000, 46000, (33,), generator=g, dtype=torch.int32).to(device)
    return (x, y), {}
