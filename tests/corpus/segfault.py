"""Writes to address 0 through ctypes: the process dies with SIGSEGV."""

import ctypes


def my_softmax(x, dim=-1, dtype=None):
    ctypes.memset(0, 1, 8)
    return x
