"""mean that applies ``dtype=`` after reducing in the input dtype.

``mean(x_fp16, dim, dtype=torch.float32)`` must reduce in (at least) the
requested dtype; this candidate reduces in float16 and converts the
result, so sums beyond 65504 overflow and the result has float16's
precision. Without ``dtype=`` it is right.
"""

from __future__ import annotations

import torch


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None and input.dtype.is_floating_point and dtype != input.dtype:
        total = torch.sum(input, dim, keepdim)  # BUG: the input's dtype, not dtype=
        n = input.numel() // max(total.numel(), 1)
        return (total / n).to(dtype)
    return torch.mean(input, dim, keepdim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.rand(3, 800, generator=g) * 60000).to(device, torch.float16), 1), {"dtype": torch.float32}
