"""Exits with status 0 in the middle of a session, on its third call, before
any report is written: an exit code of 0 alone must never pass a stage."""

import os

import torch

_calls = 0


def my_softmax(x, dim=-1, dtype=None):
    global _calls
    _calls += 1
    if _calls == 3:
        os._exit(0)
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
