"""Right values, written into the input's memory and returned: the caller's
input is gone and the result aliases it."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    if dtype is None or dtype == x.dtype:
        return x.copy_(result)
    return torch.empty_like(x, dtype=dtype).copy_(result)
