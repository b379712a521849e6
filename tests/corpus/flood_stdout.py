"""Writes 100 MB to stdout when it is loaded (a debug print left in a loop),
then behaves: the stage passes and its log is cut down to head and tail."""

import os

import torch

_chunk = (b"corpus flood " * 80 + b"\n") * 1000  # about 1 MB
for _ in range(100):
    os.write(1, _chunk)


def my_softmax(x, dim=-1, dtype=None):
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
