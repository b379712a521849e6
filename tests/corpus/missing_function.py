"""Defines helpers but not the function config.yaml names."""

import torch


def _row_max(x, dim):
    return x.amax(dim, keepdim=True)


def normalise(x, dim=-1):
    e = (x - _row_max(x, dim)).exp()
    return e / e.sum(dim, keepdim=True)


TABLE = {"softmax": normalise}
