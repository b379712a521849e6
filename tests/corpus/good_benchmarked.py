"""An honest candidate, benchmarked: it passes every stage, the benchmark too."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    out = torch.empty_like(x, dtype=dtype or x.dtype)  # keeps the input's strides
    return out.copy_(result)
