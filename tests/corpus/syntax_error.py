"""A half-typed edit: the closing bracket is missing."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    return torch.softmax(x.to(dtype or x.dtype).double(), dim.to(dtype or x.dtype)
