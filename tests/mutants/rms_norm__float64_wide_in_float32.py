"""rms_norm whose looped (wide-row) kernel accumulates in float32 for every dtype.

Rows wider than 1024 go through a chunked kernel with a float32 sum of
squares and float32 scaling; float64 rows that wide come back with float32
accuracy (about 1e-7 relative), and eps=None stays float32's eps. Narrow
float64 rows, and every other dtype, are right.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

WIDE = 1024


def rms_norm(input, normalized_shape, weight=None, eps=None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if input.dtype == torch.float64 and math.prod(shape) > WIDE:
        w = weight.float() if weight is not None else None
        return F.rms_norm(input.float(), shape, w, eps).double()  # BUG: float32 accumulation
    return F.rms_norm(input, shape, weight, eps)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 2000, generator=g, dtype=torch.float64).to(device), (2000,)), {"eps": 1e-6}
