"""silu whose large-tensor fast path forgets the contiguity check.

Past 65536 elements the kernel is launched over the input's storage as a
flat, dense array of numel elements: right for contiguous tensors, but a
transposed, stepped or padded view of that size is read in storage order
(or past its elements) and written back in logical order. Non-contiguous
tensors up to 65536 elements go through the strided path and are right.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LARGE = 1 << 16


def silu(input):
    if input.numel() > LARGE:
        # BUG: is_contiguous() not checked; the storage is read as if dense.
        flat = torch.as_strided(input, (input.numel(),), (1,), input.storage_offset())
        return F.silu(flat).view(input.shape)
    return F.silu(input)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return ((torch.randn(400, 200, generator=g) * 3).to(device).t(),), {}
