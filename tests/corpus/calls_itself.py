"""Calls the operator it replaces (meant to call the original kernel): the
override makes that the candidate again, forever."""

from gemswatch import gems


def my_softmax(x, dim=-1, dtype=None):
    return gems.softmax(x, dim, dtype=dtype)
