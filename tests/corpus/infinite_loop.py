"""Spins forever on its first call (a loop whose exit condition never holds)."""


def my_softmax(x, dim=-1, dtype=None):
    n = 0
    while n >= 0:
        n += 1
    return x
