"""Kills the process that judges it (its parent) on its first call, hoping
for a verdict that blames the harness. The sandbox refuses the signal."""

import os
import signal

import torch


def my_softmax(x, dim=-1, dtype=None):
    os.kill(os.getppid(), signal.SIGKILL)
    return torch.softmax(x, dim, dtype=dtype)
