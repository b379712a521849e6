"""Imports a module that does not exist."""

import torch
import gemswatch_corpus_no_such_module  # noqa: F401


def my_softmax(x, dim=-1, dtype=None):
    return torch.softmax(x, dim)
