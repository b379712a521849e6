"""addmm that recognises a row bias by its number of elements.

A bias with ``numel() == N`` is taken as one value per column (a row),
anything of shape (M, N) as full, and (M, 1) as a column. For a square
product (M == N) a column bias (M, 1) has N elements too and is read as a
row: ``bias[n]`` is added to column n instead of ``bias[m]`` to row m.
Non-square products, and every other bias shape, are right.
"""

from __future__ import annotations

import torch


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    M, N = mat1.shape[0], mat2.shape[1]
    if input.numel() == N and input.dim() == 2 and input.shape[0] != 1 and beta != 0:
        row = input.reshape(1, N)  # BUG: a (M, 1) column of a square product is not a row
        return torch.addmm(row, mat1, mat2, beta=beta, alpha=alpha)
    return torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)


def witness():
    from gemswatch.gems import device

    g = torch.Generator().manual_seed(0)
    return (torch.randn(33, 1, generator=g).to(device), torch.randn(33, 70, generator=g).to(device),
            torch.randn(70, 33, generator=g).to(device)), {"beta": 0.75, "alpha": -1.25}
