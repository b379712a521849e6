"""Correct, but mapped to an operator (softmax_ghost) that its tests never
call: the tests exercise gems.softmax, so this file is never run."""

import torch


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
