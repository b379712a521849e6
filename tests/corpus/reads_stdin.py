"""Reads standard input (the file descriptor, below any capture) when loaded
and on every call. A stage's stdin is empty, so each read returns at once
and nothing waits for a keyboard."""

import os

import torch

_loaded = os.read(0, 4096)


def my_softmax(x, dim=-1, dtype=None):
    os.read(0, 1)
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
