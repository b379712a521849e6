"""gelu that computes bfloat16 through float16.

The candidate's 16-bit path converts to float16, applies gelu and converts
back: right for float16, but bfloat16 inputs beyond 65504 become inf and
those below float16's subnormals become zero.
"""

from __future__ import annotations

import torch


def gelu(input, approximate="none"):
    if input.dtype == torch.bfloat16:
        y = torch.nn.functional.gelu(input.to(torch.float16).float(), approximate=approximate)
        return y.to(torch.float16).to(torch.bfloat16)  # BUG: float16's range
    return torch.nn.functional.gelu(input, approximate=approximate)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.rand(64, generator=g) * 9e5 + 1e5).to(device, torch.bfloat16),), {}
