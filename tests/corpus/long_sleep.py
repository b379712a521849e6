"""Sleeps for an hour on its first call (waiting on something that never comes)."""

import time


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(3600)
    return x
