"""Raises on every call."""


def my_softmax(x, dim=-1, dtype=None):
    raise RuntimeError("corpus: this kernel is not written yet")
