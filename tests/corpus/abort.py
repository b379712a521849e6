"""Aborts the process (what a failed C assertion in a kernel launcher does)."""

import os


def my_softmax(x, dim=-1, dtype=None):
    os.abort()
