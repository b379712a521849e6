"""A slow kernel (the sleep stands for its work) that replaces the timer's
repetition, in its own process, with one that calls it and reports a
microsecond, whichever timer times it."""

import time

import torch
from gemswatch.gems.ops import _timing
from gemswatch.testing.benchmark import timing


def _quick(self, fn, spin_cycles, setup=None):
    if setup is not None:
        setup()
    fn()
    return 0.001


timing.WallClockTimer._rep = _quick
_timing.CudaEventTimer._rep = _quick


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(0.002)
    result = torch.softmax(x.to(dtype or x.dtype).double(), dim)
    return torch.empty_like(x, dtype=dtype or x.dtype).copy_(result)
