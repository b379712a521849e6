"""softmax whose looped (wide-row) kernel keeps float32 accumulators only.

Rows wider than 1024 are walked in chunks with a float32 running max and
sum whatever the dtype: float64 rows (or ``dtype=torch.float64``) that
wide come back with float32 accuracy (about 1e-7 relative). Narrow float64
rows and every other dtype are right.
"""

from __future__ import annotations

import torch

WIDE = 1024


def softmax(input, dim=-1, dtype=None):
    out_dtype = dtype or input.dtype
    if out_dtype == torch.float64 and input.dim() and input.shape[dim] > WIDE:
        return torch.softmax(input.to(torch.float32), dim).to(torch.float64)  # BUG: float32 accumulators
    return torch.softmax(input, dim, dtype=dtype)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(2, 2000, generator=g, dtype=torch.float64) * 3).to(device), -1), {}
