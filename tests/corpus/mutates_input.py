"""Right result, but it uses its input as scratch space and leaves it changed."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    out = torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
    if x.numel():
        x.sub_(x.amax())  # "harmless" shift, but the caller's tensor changed
        x.add_(1)
    return out
