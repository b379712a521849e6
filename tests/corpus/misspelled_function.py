"""The function's name is misspelled (config.yaml asks for my_softmax)."""

import torch


def my_sofmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
