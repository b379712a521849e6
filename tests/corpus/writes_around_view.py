"""Right result, but a sliced input's storage (the elements around the
view, which the caller still owns) is used as scratch space."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    out = torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
    base = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage())
    if base.numel() > x.numel() and x.storage_offset() > 0:
        base[0] = 12345.0  # outside the view: the slice starts later
    return out
