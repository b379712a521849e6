"""Changes the working directory on every call; reports and paths must not
depend on it."""

import os
import tempfile

import torch


def my_softmax(x, dim=-1, dtype=None):
    os.chdir(tempfile.gettempdir())
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
