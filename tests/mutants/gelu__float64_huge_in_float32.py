"""gelu whose large-tensor path computes in float32 lanes only.

Past 65536 elements a persistent kernel loads, evaluates erf / tanh and
stores through float32 whatever the dtype: float64 tensors that large are
off by about 1e-8 relative (and values beyond float32's range overflow).
Smaller float64 tensors and the other dtypes are right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LARGE = 1 << 16


def gelu(input, approximate="none"):
    if input.dtype == torch.float64 and input.numel() > LARGE:
        return F.gelu(input.to(torch.float32), approximate=approximate).to(torch.float64)  # BUG
    out = F.gelu(input, approximate=approximate)
    # torch's float32 CPU kernel gives NaN for +-inf; take those from float64
    return torch.where(input.isinf(), F.gelu(input.double(), approximate=approximate).to(input.dtype), out)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(70001, generator=g, dtype=torch.float64).mul(3).to(device),), {"approximate": "tanh"}
