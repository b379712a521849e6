"""Right values, but always float64: the result dtype is part of the contract."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    return torch.softmax(x.to(dtype or x.dtype).double(), dim)
