"""Deletes its own file when it is loaded. gemswatch runs a snapshot of the
saved bytes, and every stage gets the snapshot back, so it still passes."""

import os

import torch

os.remove(__file__)


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
